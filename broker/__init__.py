"""kmirror broker daemon (see ../shared design: app -> api -> coordinator|controller -> replication -> log)."""
