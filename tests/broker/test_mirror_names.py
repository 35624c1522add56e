"""The name mapping of prefixed mirrors (`broker.metadata.mirror_names`): pure functions."""

from broker.metadata import mirror_names as mn


def test_prefix_maps_topics_both_ways_and_groups_only_when_enabled() -> None:
    n = mn.naming({mn.TOPIC_PREFIX_KEY: "east.", mn.GROUP_PREFIX_ENABLE_KEY: "true"})
    assert n.local_topic("orders") == "east.orders"
    assert n.source_topic("east.orders") == "orders"
    assert n.source_topic("other") == "other"  # not one of its prefixed names: as it is
    assert (n.local_group("g"), n.source_group("east.g")) == ("east.g", "g")
    topics_only = mn.naming({mn.TOPIC_PREFIX_KEY: "east."})
    assert topics_only.local_group("g") == "g"
    plain = mn.naming({})
    assert (plain.local_topic("orders"), plain.source_topic("orders")) == ("orders", "orders")
    # a group prefix without a topic prefix has nothing to add
    assert mn.naming({mn.GROUP_PREFIX_ENABLE_KEY: "true"}).local_group("g") == "g"


def test_config_values_are_checked() -> None:
    assert mn.config_error(mn.TOPIC_PREFIX_KEY, "east.") is None
    why = mn.config_error(mn.TOPIC_PREFIX_KEY, "east/")
    assert why is not None and "only ASCII alphanumerics" in why
    assert mn.config_error(mn.TOPIC_PREFIX_KEY, "x" * 249) is not None
    assert mn.config_error(mn.GROUP_PREFIX_ENABLE_KEY, "yes") is not None
    assert mn.config_error(mn.GROUP_PREFIX_ENABLE_KEY, "TRUE") is None


def test_naming_keys_are_immutable() -> None:
    assert mn.change_error("dr", mn.TOPIC_PREFIX_KEY, "east.", "east.") is None
    why = mn.change_error("dr", mn.TOPIC_PREFIX_KEY, "east.", "west.")
    assert why is not None and "mirror dr" in why and "east." in why
    assert mn.change_error("dr", mn.TOPIC_PREFIX_KEY, None, "west.") is not None
    assert mn.change_error("dr", mn.GROUP_PREFIX_ENABLE_KEY, "true", None) is not None
    assert mn.change_error("dr", "bootstrap.servers", "a:1", "b:2") is None


def test_bad_local_names_name_the_mirror_and_topic() -> None:
    long = "t" * 245
    why = mn.local_name_error("dr", long, "east." + long)
    assert why is not None and "dr" in why and long in why and "249" in why
    assert mn.local_name_error("dr", "orders", "east.orders") is None


def test_collisions_equal_or_dot_underscore() -> None:
    n = mn.naming({mn.TOPIC_PREFIX_KEY: "east."})
    mapping = {s: n.local_topic(s) for s in ("a.b", "a_b", "c")}
    out = mn.collisions("dr", mapping)
    assert set(out) == {"a.b", "a_b"}
    assert "dr" in out["a.b"] and "a_b" in out["a.b"]
    assert mn.clashing_local("east.a_b", ["east.a.b", "x"]) == "east.a.b"
    assert mn.clashing_local("east.c", ["east.a.b"]) is None


def test_origin_chain_and_loops() -> None:
    assert mn.chain_value(None, "B") == "B"
    assert mn.chain_value("A", "B") == "A,B"
    assert mn.chain_value("A,B", "B") == "A,B"  # already last: not twice
    assert mn.chain_value(None, None) is None
    cfg = {mn.SOURCE_CLUSTER_IDS_CONFIG: "A,B"}
    assert mn.loops_back(cfg, "A") and mn.loops_back(cfg, "B")
    assert not mn.loops_back(cfg, "C")
    assert not mn.loops_back({}, "A")
    assert not mn.loops_back(cfg, "")


def test_acl_resources_follow_the_rename() -> None:
    n = mn.naming({mn.TOPIC_PREFIX_KEY: "east.", mn.GROUP_PREFIX_ENABLE_KEY: "true"})
    topic, group, cluster, literal, prefixed = 2, 3, 4, 3, 4
    assert mn.acl_resource(n, topic, "orders", literal) == ("east.orders", literal)
    assert mn.acl_resource(n, topic, "ord", prefixed) == ("east.ord", prefixed)
    assert mn.acl_resource(n, topic, "*", literal) == ("east.", prefixed)
    assert mn.acl_resource(n, group, "g", literal) == ("east.g", literal)
    assert mn.acl_resource(n, cluster, "kafka-cluster", literal) == ("kafka-cluster", literal)
    topics_only = mn.naming({mn.TOPIC_PREFIX_KEY: "east."})
    assert mn.acl_resource(topics_only, group, "g", literal) == ("g", literal)
    assert mn.acl_resource(mn.naming({}), topic, "orders", literal) == ("orders", literal)
