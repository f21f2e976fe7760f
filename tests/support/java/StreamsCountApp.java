// A stateful Kafka Streams counting app for the streams tests (embedded and sidecar mode): counts
// the records of each key of "words" in a persistent store and writes every new count to "counts".
// Joins with group.protocol=streams, at-least-once (the embedded data plane refuses transactions).
// Args: bootstrap application.id state.dir instance-name [input-topic output-topic] (default
// "words" and "counts": tests sharing one broker use topics of their own). Prints "STATE <state>" on each change
// and "TASKS active=[...] standby=[...]" whenever the tasks it runs change (warm-ups run as
// standbys); runs until killed or its stdin closes.
// For the scale-out measurements (tests/support/streams_scaleout.py) it also prints, per task (one
// subtopology: task 0_P works on partition P of "words" and of the store's changelog):
//   "PROCESSED <task> <epoch-ms>"  a record processed, at most every 50 ms per task, and the last
//                                  one when the task closes (so a hand-over's gap is exact);
//   "RESTORE_START <partition> <store> <from> <to>" and "RESTORED <partition> <store> <records> <ms>"
//                                  an active task's restoration (the state restore listener);
//   "STANDBY_START <partition> <store> <offset>" and "STANDBY_END <partition> <store> <records> <reason>"
//                                  a standby's (or warm-up's) updating, PROMOTED when it becomes active.

import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.streams.processor.StandbyUpdateListener;
import org.apache.kafka.streams.processor.StateRestoreListener;
import org.apache.kafka.streams.processor.TaskId;
import org.apache.kafka.streams.processor.api.FixedKeyProcessor;
import org.apache.kafka.streams.processor.api.FixedKeyProcessorContext;
import org.apache.kafka.streams.processor.api.FixedKeyRecord;
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
            .processValues(ProcessedMarker::new)
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
        streams.setGlobalStateRestoreListener(new RestoreMarker());
        streams.setStandbyUpdateListener(new StandbyMarker());
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

    static synchronized void print(String line) {
        System.out.println(line);
        System.out.flush();
    }

    /** Passes every count on and prints when its task processed one (PROCESSED lines). */
    static final class ProcessedMarker implements FixedKeyProcessor<String, Long, Long> {
        private FixedKeyProcessorContext<String, Long> context;
        private long lastProcessed = 0;
        private long lastPrinted = 0;

        @Override
        public void init(FixedKeyProcessorContext<String, Long> context) {
            this.context = context;
        }

        @Override
        public void process(FixedKeyRecord<String, Long> record) {
            lastProcessed = System.currentTimeMillis();
            if (lastProcessed - lastPrinted >= 50) {
                print("PROCESSED " + context.taskId() + " " + lastProcessed);
                lastPrinted = lastProcessed;
            }
            context.forward(record);
        }

        @Override
        public void close() {
            if (lastProcessed > lastPrinted) print("PROCESSED " + context.taskId() + " " + lastProcessed);
        }
    }

    /** An active task's restoration from its changelog (RESTORE_START / RESTORED lines). */
    static final class RestoreMarker implements StateRestoreListener {
        private final Map<TopicPartition, Long> started = new ConcurrentHashMap<>();

        @Override
        public void onRestoreStart(TopicPartition partition, String store, long from, long to) {
            started.put(partition, System.currentTimeMillis());
            print("RESTORE_START " + partition.partition() + " " + store + " " + from + " " + to);
        }

        @Override
        public void onBatchRestored(TopicPartition partition, String store, long batchEnd, long records) {
        }

        @Override
        public void onRestoreEnd(TopicPartition partition, String store, long records) {
            Long start = started.remove(partition);
            long ms = start == null ? -1 : System.currentTimeMillis() - start;
            print("RESTORED " + partition.partition() + " " + store + " " + records + " " + ms);
        }

        @Override
        public void onRestoreSuspended(TopicPartition partition, String store, long records) {
            started.remove(partition);
            print("RESTORE_SUSPENDED " + partition.partition() + " " + store + " " + records);
        }
    }

    /** A standby's (a warm-up's) updating from the changelog (STANDBY_START / STANDBY_END lines). */
    static final class StandbyMarker implements StandbyUpdateListener {
        private final Map<TopicPartition, Long> loaded = new ConcurrentHashMap<>();

        @Override
        public void onUpdateStart(TopicPartition partition, String store, long offset) {
            loaded.put(partition, 0L);
            print("STANDBY_START " + partition.partition() + " " + store + " " + offset);
        }

        @Override
        public void onBatchLoaded(TopicPartition partition, String store, TaskId task, long batchEnd, long records,
                                  long end) {
            loaded.merge(partition, records, Long::sum);
        }

        @Override
        public void onUpdateSuspended(TopicPartition partition, String store, long offset, long end,
                                      SuspendReason reason) {
            Long records = loaded.remove(partition);
            print("STANDBY_END " + partition.partition() + " " + store + " " + (records == null ? 0 : records) + " "
                  + reason);
        }
    }
}
