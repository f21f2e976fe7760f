import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListGroupsOptions;
import org.apache.kafka.clients.admin.ListShareGroupOffsetsSpec;
import org.apache.kafka.clients.admin.ShareGroupDescription;
import org.apache.kafka.clients.admin.ShareMemberDescription;
import org.apache.kafka.clients.admin.SharePartitionOffsetInfo;
import org.apache.kafka.common.TopicPartition;

/**
 * Kafka 4.3's Admin client on share groups, for the share group offsets tests. Arguments: the
 * bootstrap servers, then commands, each one argument, run in order:
 * "list" (every share group: "group ID STATE"), "describe G" ("described G STATE MEMBERS" and a
 * "member ID EPOCH TOPIC-PARTITIONS" line each), "offsets G" ("offset G TOPIC PARTITION START LAG",
 * lag -1 when absent), "alter G TOPIC:PARTITION=OFFSET,..." ("altered G"), "delete G TOPIC,..."
 * ("deleted G"). A failed command prints "error G EXCEPTION" (the cause's simple class name).
 */
public class ShareAdmin {
    public static void main(String[] args) throws InterruptedException {
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        props.put("request.timeout.ms", "10000");
        props.put("default.api.timeout.ms", "20000");
        try (Admin admin = Admin.create(props)) {
            for (int i = 1; i < args.length; i++) {
                String[] words = args[i].split(" ");
                String group = words.length > 1 ? words[1] : "";
                try {
                    run(admin, words, group);
                } catch (ExecutionException e) {
                    System.out.println("error " + group + " " + e.getCause().getClass().getSimpleName());
                }
                System.out.flush();
            }
        }
    }

    private static void run(Admin admin, String[] words, String group) throws ExecutionException, InterruptedException {
        switch (words[0]) {
            case "list":
                for (GroupListing g : admin.listGroups(ListGroupsOptions.forShareGroups()).all().get()) {
                    System.out.println("group " + g.groupId() + " " + g.groupState().map(Object::toString).orElse("?"));
                }
                break;
            case "describe":
                ShareGroupDescription d = admin.describeShareGroups(List.of(group)).describedGroups().get(group).get();
                System.out.println("described " + group + " " + d.groupState() + " " + d.members().size());
                for (ShareMemberDescription m : d.members()) {
                    List<String> parts = new ArrayList<>();
                    for (TopicPartition tp : m.assignment().topicPartitions()) {
                        parts.add(tp.topic() + "-" + tp.partition());
                    }
                    parts.sort(null);
                    System.out.println("member " + m.consumerId() + " " + m.memberEpoch() + " " + String.join(",", parts));
                }
                break;
            case "offsets":
                Map<TopicPartition, SharePartitionOffsetInfo> offsets = admin
                    .listShareGroupOffsets(Map.of(group, new ListShareGroupOffsetsSpec()))
                    .partitionsToOffsetInfo(group).get();
                for (Map.Entry<TopicPartition, SharePartitionOffsetInfo> e : offsets.entrySet()) {
                    System.out.println("offset " + group + " " + e.getKey().topic() + " " + e.getKey().partition() + " "
                        + e.getValue().startOffset() + " " + e.getValue().lag().orElse(-1L));
                }
                break;
            case "alter":
                Map<TopicPartition, Long> wanted = new HashMap<>();
                for (String item : words[2].split(",")) {
                    String[] kv = item.split("=");
                    String[] tp = kv[0].split(":");
                    wanted.put(new TopicPartition(tp[0], Integer.parseInt(tp[1])), Long.parseLong(kv[1]));
                }
                admin.alterShareGroupOffsets(group, wanted).all().get();
                System.out.println("altered " + group);
                break;
            case "delete":
                Set<String> topics = new HashSet<>(List.of(words[2].split(",")));
                admin.deleteShareGroupOffsets(group, topics).all().get();
                System.out.println("deleted " + group);
                break;
            default:
                throw new IllegalArgumentException("unknown command " + words[0]);
        }
    }
}
