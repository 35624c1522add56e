"""The metadata quorum's Raft core (KRaft, KIP-595/630/853), sans-IO: messages, timer expiries and
local appends in; messages to send, log writes, fsyncs and the commit point out. Any number of
voters, static (``controller.quorum.voters``) or changed through the log (Voters records)."""
