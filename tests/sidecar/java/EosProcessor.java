// An exactly-once consume-transform-produce processor on the Java client (kafka-clients 4.3.0),
// run by tests/sidecar/test_transactions_java.py through the sidecar:
//   java EosProcessor BOOTSTRAP INPUT OUTPUT GROUP TRANSACTIONAL_ID PROTOCOL
// Each transaction writes "out:<value>" per input record and commits the consumer's positions with
// sendOffsetsToTransaction(offsets, consumer.groupMetadata()). An abortable error aborts and rewinds
// to the committed offsets. It prints "DONE <transactions>" and exits 0 once its positions reach the
// input's end with no transaction open.
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class EosProcessor {
    public static void main(String[] args) {
        String bootstrap = args[0], input = args[1], output = args[2], group = args[3], txnId = args[4];
        Properties c = new Properties();
        c.put("bootstrap.servers", bootstrap);
        c.put("group.id", group);
        c.put("group.protocol", args[5]);
        c.put("isolation.level", "read_committed");
        c.put("enable.auto.commit", "false");
        c.put("auto.offset.reset", "earliest");
        c.put("key.deserializer", ByteArrayDeserializer.class.getName());
        c.put("value.deserializer", ByteArrayDeserializer.class.getName());
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("transactional.id", txnId);
        p.put("key.serializer", ByteArraySerializer.class.getName());
        p.put("value.serializer", ByteArraySerializer.class.getName());
        int transactions = 0;
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(c);
             KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            producer.initTransactions();
            consumer.subscribe(List.of(input));
            long deadline = System.currentTimeMillis() + 120_000;
            while (System.currentTimeMillis() < deadline) {
                ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(300));
                if (records.isEmpty()) {
                    if (reachedEnd(consumer)) {
                        System.out.println("DONE " + transactions);
                        return;
                    }
                    continue;
                }
                producer.beginTransaction();
                try {
                    Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                    for (ConsumerRecord<byte[], byte[]> r : records) {
                        byte[] value = ("out:" + new String(r.value())).getBytes();
                        producer.send(new ProducerRecord<>(output, r.key(), value));
                        offsets.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                    }
                    producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
                    producer.commitTransaction();
                    transactions++;
                    System.out.println("COMMITTED " + transactions + " " + records.count());
                } catch (ProducerFencedException e) {
                    System.out.println("FENCED " + e);
                    System.exit(3);
                } catch (KafkaException e) {
                    System.out.println("ABORT " + e);
                    producer.abortTransaction();
                    Set<TopicPartition> assigned = consumer.assignment();
                    consumer.committed(assigned).forEach((tp, om) -> {
                        if (om != null) consumer.seek(tp, om.offset()); else consumer.seekToBeginning(List.of(tp));
                    });
                }
            }
            System.out.println("TIMEOUT " + transactions);
            System.exit(2);
        }
    }

    static boolean reachedEnd(KafkaConsumer<byte[], byte[]> consumer) {
        Set<TopicPartition> assigned = consumer.assignment();
        if (assigned.isEmpty()) return false;
        Map<TopicPartition, Long> ends = consumer.endOffsets(assigned);
        for (TopicPartition tp : assigned) {
            if (consumer.position(tp) < ends.get(tp)) return false;
        }
        return true;
    }
}
