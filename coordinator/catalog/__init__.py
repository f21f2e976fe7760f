"""Topic metadata the coordinator serves and assigns from: names, topic ids, partition counts."""

from .catalog import CatalogError, Topic, TopicCatalog, TopicChange
from .source import TopicSource

__all__ = ["CatalogError", "Topic", "TopicCatalog", "TopicChange", "TopicSource"]
