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
 * Arguments: bootstrap servers, group id, topic.
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
}
