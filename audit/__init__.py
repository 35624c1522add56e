"""Mirror audit: prove a mirror complete and identical from dumped segments, on PySpark.

Depends only on ``protocol`` (record batch headers); never on ``broker``. Entry points:
``bin/kafka-mirror-audit.sh`` and ``spark-submit audit/__main__.py`` (see docs/audit.md).
"""
