import java.io.IOException;
import java.time.Duration;
import java.util.List;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;

/**
 * A share consumer (Kafka 4.3's KafkaShareConsumer, implicit acknowledgement) for the share group
 * tests: prints "partition:offset" of every record it is given, one a line, until its standard
 * input says stop (any byte); then acknowledges what it holds, closes and prints "closed".
 * Arguments: bootstrap servers, group id, topic, and optionally "hold": then it prints the records
 * of its first poll that returns any, then "holding", and polls no more (so it never acknowledges
 * them) until it is killed.
 */
public class ShareReader {
    public static void main(String[] args) throws IOException {
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        props.put("group.id", args[1]);
        props.put("key.deserializer", "org.apache.kafka.common.serialization.ByteArrayDeserializer");
        props.put("value.deserializer", "org.apache.kafka.common.serialization.ByteArrayDeserializer");
        try (KafkaShareConsumer<byte[], byte[]> consumer = new KafkaShareConsumer<>(props)) {
            consumer.subscribe(List.of(args[2]));
            if (args.length > 3 && args[3].equals("hold")) {
                hold(consumer);
                return;
            }
            while (System.in.available() == 0) {
                for (ConsumerRecord<byte[], byte[]> record : consumer.poll(Duration.ofMillis(200))) {
                    System.out.println(record.partition() + ":" + record.offset());
                }
                System.out.flush();
            }
            consumer.commitSync();
        }
        System.out.println("closed");
        System.out.flush();
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
