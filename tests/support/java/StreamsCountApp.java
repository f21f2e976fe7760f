// A stateful Kafka Streams counting app for the streams tests (embedded and sidecar mode): counts
// the records of each key of "words" in a persistent store and writes every new count to "counts".
// Joins with group.protocol=streams, at-least-once (the embedded data plane refuses transactions).
// Args: bootstrap application.id state.dir instance-name [input-topic output-topic] (default
// "words" and "counts": tests sharing one broker use topics of their own). Prints "STATE <state>" on each change
// and "TASKS active=[...] standby=[...]" whenever the tasks it runs change (warm-ups run as
// standbys); runs until killed or its stdin closes.

import java.util.Properties;
import java.util.TreeSet;
import org.apache.kafka.streams.ThreadMetadata;
import org.apache.kafka.streams.TaskMetadata;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;

public class StreamsCountApp {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, args[1]);
        props.put(StreamsConfig.STATE_DIR_CONFIG, args[2]);
        props.put(StreamsConfig.CLIENT_ID_CONFIG, args[3]);
        props.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, "streams");
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.AT_LEAST_ONCE);
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 200);
        props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        props.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 1);

        String input = args.length > 4 ? args[4] : "words";
        String output = args.length > 5 ? args[5] : "counts";
        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
            .groupByKey()
            .count(Materialized.as("counts-store"))
            .toStream()
            .to(output, Produced.with(Serdes.String(), Serdes.Long()));

        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        streams.setStateListener((now, before) -> {
            System.out.println("STATE " + now);
            System.out.flush();
        });
        streams.setUncaughtExceptionHandler(e -> {
            System.out.println("ERROR " + e);
            System.out.flush();
            return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.REPLACE_THREAD;
        });
        streams.start();
        Thread watcher = new Thread(() -> {
            String last = "";
            while (true) {
                TreeSet<String> active = new TreeSet<>();
                TreeSet<String> standby = new TreeSet<>();
                try {
                    for (ThreadMetadata thread : streams.metadataForLocalThreads()) {
                        for (TaskMetadata task : thread.activeTasks()) active.add(task.taskId().toString());
                        for (TaskMetadata task : thread.standbyTasks()) standby.add(task.taskId().toString());
                    }
                } catch (RuntimeException e) {
                    // not running yet, or closing
                }
                String now = "TASKS active=" + active + " standby=" + standby;
                if (!now.equals(last)) {
                    System.out.println(now);
                    System.out.flush();
                    last = now;
                }
                try {
                    Thread.sleep(20);
                } catch (InterruptedException e) {
                    return;
                }
            }
        });
        watcher.setDaemon(true);
        watcher.start();
        while (System.in.read() != -1) {
            // runs until stdin closes (the test's stop) or the process is killed
        }
        streams.close(java.time.Duration.ofSeconds(10));
    }
}
