"""The mirror's core, without I/O (issue 28): what a mirrored partition does next, decided from
what the shell tells it; the shells (`broker.mirror.manager` and its parts, the fetchers, the
coordinator client) carry the decisions out. No event loop, no sockets, no log files, no clock
or randomness of its own: an import-linter contract keeps it so, and
tests/broker/test_mirror_sim.py drives it through thousands of seeded histories.

- `states`: the wanted state from ``mirror.name``, the next transition towards it, what the
  manager remembers of a partition.
- `transitions`: the work of each transition, in the KIP's order (`plan`).
- `truncation`: where PREPARING's LME truncation cuts, STOPPING's LSO cut and epoch bump, and
  where a diverged or out-of-range log is realigned with the source.
- `truncation_wait`: PREPARING's bounded wait for the other replicas to truncate.
- `fetch_position`: what to do with one partition of a source Fetch answer.
- `control_check`: the control batches a mirror cannot read.
- `acl_rules`, `config_filter`: which ACLs and topic configs are synced.
"""
