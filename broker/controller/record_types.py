"""The metadata record classes the controller's requests emit (latest versions)."""

from protocol.metadata_records import latest_type

TopicRecord = latest_type("TopicRecord")
PartitionRecord = latest_type("PartitionRecord")
ConfigRecord = latest_type("ConfigRecord")
RemoveTopicRecord = latest_type("RemoveTopicRecord")
ProducerIdsRecord = latest_type("ProducerIdsRecord")
RegisterBrokerRecord = latest_type("RegisterBrokerRecord")
UnfenceBrokerRecord = latest_type("UnfenceBrokerRecord")
FeatureLevelRecord = latest_type("FeatureLevelRecord")
