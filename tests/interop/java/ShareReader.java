import java.io.IOException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicIdPartition;

/**
 * A share consumer (Kafka 4.3's KafkaShareConsumer, implicit acknowledgement) for the share group
 * tests: prints "partition:offset" of every record it is given, one a line, until its standard
 * input says stop (any byte); then acknowledges what it holds, closes and prints "closed".
 * Arguments: bootstrap servers, group id, topic, and optionally a mode:
 * - "hold": it prints the records of its first poll that returns any, then "holding", and polls no
 *   more (so it never acknowledges them) until it is killed;
 * - "judge": explicit acknowledgement, each record decided by its place (see {@link #judge}), and
 *   printed as "partition:offset:decision";
 * - "commit": explicit acknowledgement, each record accepted and committed (commitSync) after the
 *   poll that returned it; then "ok:partition:offset" for each record whose partition's
 *   acknowledgement the coordinator answered with success (see {@link #commitEach}), 200 records
 *   a poll at most.
 */
public class ShareReader {
    public static void main(String[] args) throws IOException {
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        props.put("group.id", args[1]);
        props.put("key.deserializer", "org.apache.kafka.common.serialization.ByteArrayDeserializer");
        props.put("value.deserializer", "org.apache.kafka.common.serialization.ByteArrayDeserializer");
        String mode = args.length > 3 ? args[3] : "read";
        if (mode.equals("judge") || mode.equals("commit")) {
            props.put("share.acknowledgement.mode", "explicit");
        }
        if (mode.equals("commit")) {
            props.put("max.poll.records", "200");  // many rounds of fetch and commit
        }
        try (KafkaShareConsumer<byte[], byte[]> consumer = new KafkaShareConsumer<>(props)) {
            consumer.subscribe(List.of(args[2]));
            if (mode.equals("hold")) {
                hold(consumer);
                return;
            }
            if (mode.equals("commit")) {
                commitEach(consumer);
                return;
            }
            while (System.in.available() == 0) {
                for (ConsumerRecord<byte[], byte[]> record : consumer.poll(Duration.ofMillis(200))) {
                    if (mode.equals("judge")) {
                        AcknowledgeType decision = judge(record);
                        consumer.acknowledge(record, decision);
                        System.out.println(record.partition() + ":" + record.offset() + ":" + decision);
                    } else {
                        System.out.println(record.partition() + ":" + record.offset());
                    }
                }
                System.out.flush();
            }
            consumer.commitSync();
        }
        System.out.println("closed");
        System.out.flush();
    }

    /**
     * Partition 0's offset 0 always fails (RELEASE: delivered again until the delivery limit
     * archives it); other offsets divisible by 3 are released on their first delivery and accepted
     * on the next; offsets leaving 1 are rejected; the rest accepted.
     */
    private static AcknowledgeType judge(ConsumerRecord<byte[], byte[]> record) {
        if (record.partition() == 0 && record.offset() == 0) {
            return AcknowledgeType.RELEASE;
        }
        if (record.offset() % 3 == 0) {
            return record.deliveryCount().orElse((short) 1) == 1 ? AcknowledgeType.RELEASE : AcknowledgeType.ACCEPT;
        }
        return record.offset() % 3 == 1 ? AcknowledgeType.REJECT : AcknowledgeType.ACCEPT;
    }

    /**
     * Until standard input says stop: accept every record and commit after each poll. A poll or a
     * commit that fails (the coordinator going away) is skipped: what it acknowledged is unknown.
     */
    private static void commitEach(KafkaShareConsumer<byte[], byte[]> consumer) throws IOException {
        while (System.in.available() == 0) {
            List<ConsumerRecord<byte[], byte[]>> got = new ArrayList<>();
            try {
                ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(200));
                for (ConsumerRecord<byte[], byte[]> record : records) {
                    System.out.println(record.partition() + ":" + record.offset());
                    consumer.acknowledge(record, AcknowledgeType.ACCEPT);
                    got.add(record);
                }
                System.out.flush();
                if (got.isEmpty()) {
                    continue;
                }
                Map<TopicIdPartition, Optional<KafkaException>> result = consumer.commitSync();
                for (ConsumerRecord<byte[], byte[]> record : got) {
                    boolean ok = result.entrySet().stream().anyMatch(
                            e -> e.getKey().partition() == record.partition() && e.getValue().isEmpty());
                    if (ok) {
                        System.out.println("ok:" + record.partition() + ":" + record.offset());
                    }
                }
                System.out.flush();
            } catch (KafkaException e) {
                System.err.println("skipped: " + e);
            }
        }
    }

    private static void hold(KafkaShareConsumer<byte[], byte[]> consumer) throws IOException {
        boolean got = false;
        while (!got) {
            for (ConsumerRecord<byte[], byte[]> record : consumer.poll(Duration.ofMillis(200))) {
                System.out.println(record.partition() + ":" + record.offset());
                got = true;
            }
        }
        System.out.println("holding");
        System.out.flush();
        while (System.in.read() >= 0) {
            // until killed: no further poll, so nothing is acknowledged
        }
    }
}
