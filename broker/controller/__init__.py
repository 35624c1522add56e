"""The controller: turns admin requests into metadata records and commits them through the quorum."""
