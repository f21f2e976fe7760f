"""coordinator: a Kafka-protocol group coordinator (classic and KIP-848) on asyncio."""
