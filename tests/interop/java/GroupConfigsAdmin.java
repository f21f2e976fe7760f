// Per-group configs through the Java Admin client: incrementalAlterConfigs and describeConfigs on
// ConfigResource(GROUP, id), and a refused value. Prints one line per result for the Python test.
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.common.config.ConfigResource;

public class GroupConfigsAdmin {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        ConfigResource group = new ConfigResource(ConfigResource.Type.GROUP, args[1]);
        try (Admin admin = Admin.create(props)) {
            admin.incrementalAlterConfigs(Map.of(group, List.of(
                new AlterConfigOp(new ConfigEntry("streams.num.standby.replicas", "1"), AlterConfigOp.OpType.SET),
                new AlterConfigOp(new ConfigEntry("consumer.session.timeout.ms", "50000"), AlterConfigOp.OpType.SET))))
                .all().get();
            System.out.println("altered");
            try {
                admin.incrementalAlterConfigs(Map.of(group, List.of(
                    new AlterConfigOp(new ConfigEntry("streams.num.standby.replicas", "5"), AlterConfigOp.OpType.SET))))
                    .all().get();
                System.out.println("refused=none");
            } catch (ExecutionException e) {
                System.out.println("refused=" + e.getCause().getClass().getSimpleName() + ": " + e.getCause().getMessage());
            }
            Config config = admin.describeConfigs(List.of(group)).all().get().get(group);
            for (ConfigEntry entry : config.entries()) {
                System.out.println("entry=" + entry.name() + "=" + entry.value() + " " + entry.source());
            }
        }
    }
}
