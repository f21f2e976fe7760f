// Kafka's own generated message classes (Apache trunk clients) write the StreamsGroupHeartbeat
// bodies that tests/protocol/test_streams_java.py compares with protocol.newer's. Prints one hex
// line per body: response v0, response v1, request v1.
import java.nio.ByteBuffer;
import java.util.List;

import org.apache.kafka.common.message.StreamsGroupHeartbeatRequestData;
import org.apache.kafka.common.message.StreamsGroupHeartbeatResponseData;
import org.apache.kafka.common.protocol.ByteBufferAccessor;
import org.apache.kafka.common.protocol.Message;
import org.apache.kafka.common.protocol.ObjectSerializationCache;

public class StreamsHeartbeatWire {
    static String hex(Message message, short version) {
        ObjectSerializationCache cache = new ObjectSerializationCache();
        ByteBuffer buffer = ByteBuffer.allocate(message.size(cache, version));
        message.write(new ByteBufferAccessor(buffer), cache, version);
        StringBuilder out = new StringBuilder();
        for (byte b : buffer.array()) out.append(String.format("%02x", b));
        return out.toString();
    }

    static StreamsGroupHeartbeatResponseData response(short version) {
        StreamsGroupHeartbeatResponseData r = new StreamsGroupHeartbeatResponseData()
            .setMemberId("m-1").setMemberEpoch(5).setHeartbeatIntervalMs(5000).setTaskOffsetIntervalMs(60000)
            .setStatus(List.of(new StreamsGroupHeartbeatResponseData.Status().setStatusCode((byte) 5).setStatusDetail("delayed")))
            .setActiveTasks(List.of(new StreamsGroupHeartbeatResponseData.TaskIds().setSubtopologyId("0").setPartitions(List.of(0, 2))))
            .setStandbyTasks(List.of())
            .setWarmupTasks(List.of(new StreamsGroupHeartbeatResponseData.TaskIds().setSubtopologyId("0").setPartitions(List.of(1))))
            .setEndpointInformationEpoch(3)
            .setPartitionsByUserEndpoint(List.of(new StreamsGroupHeartbeatResponseData.EndpointToPartitions()
                .setUserEndpoint(new StreamsGroupHeartbeatResponseData.Endpoint().setHost("h").setPort(8080))
                .setActivePartitions(List.of(new StreamsGroupHeartbeatResponseData.TopicPartition().setTopic("input").setPartitions(List.of(0, 2))))
                .setStandbyPartitions(List.of(new StreamsGroupHeartbeatResponseData.TopicPartition().setTopic("input").setPartitions(List.of(1))))));
        if (version >= 1) {
            r.setAcceptableRecoveryLag(1L << 33).setTopologyDescriptionRequired(true);
        }
        return r;
    }

    static StreamsGroupHeartbeatRequestData request() {
        return new StreamsGroupHeartbeatRequestData()
            .setGroupId("app").setMemberId("m-1").setMemberEpoch(0).setEndpointInformationEpoch(0)
            .setRebalanceTimeoutMs(300000).setProcessId("p-1")
            .setTopology(new StreamsGroupHeartbeatRequestData.Topology().setEpoch(0).setSubtopologies(List.of(
                new StreamsGroupHeartbeatRequestData.Subtopology().setSubtopologyId("0").setSourceTopics(List.of("input"))
                    .setStateChangelogTopics(List.of(new StreamsGroupHeartbeatRequestData.TopicInfo()
                        .setName("app-store-changelog").setTopicConfigs(List.of(
                            new StreamsGroupHeartbeatRequestData.KeyValue().setKey("cleanup.policy").setValue("compact"))))))))
            .setActiveTasks(List.of()).setStandbyTasks(List.of()).setWarmupTasks(List.of())
            .setUserEndpoint(new StreamsGroupHeartbeatRequestData.Endpoint().setHost("localhost").setPort(65535))
            .setClientTags(List.of(new StreamsGroupHeartbeatRequestData.KeyValue().setKey("zone").setValue("a")))
            .setTaskOffsets(List.of(new StreamsGroupHeartbeatRequestData.TaskOffset().setSubtopologyId("0").setPartition(3).setOffset(1L << 40)))
            .setTaskEndOffsets(List.of(new StreamsGroupHeartbeatRequestData.TaskOffset().setSubtopologyId("0").setPartition(3).setOffset(1L << 41)));
    }

    public static void main(String[] args) {
        System.out.println(hex(response((short) 0), (short) 0));
        System.out.println(hex(response((short) 1), (short) 1));
        System.out.println(hex(request(), (short) 1));
    }
}
