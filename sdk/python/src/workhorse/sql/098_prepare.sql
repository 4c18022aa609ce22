-- Partitions for today and the next week exist as soon as the schema is installed.
SELECT workhorse.prepare_partitions_v1(7);
