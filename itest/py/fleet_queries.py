"""Runs SQL queries over a fleet's Parquet export in DuckDB and in Apache Spark (local mode).

    python3 fleet_queries.py ROOT [NAME=ROOT...]  < queries.json   ([[name, sql], ...])

Prints {"duckdb": {name: rows}, "spark": {name: rows}}: each row a list, numbers as
numbers (decimals and floats as floats), in the order the query gives. The views `events`,
`blocks`, `processes`, `stacks` are the tables of every host=/pid= directory under ROOT
(docs/fleets.md); each NAME=ROOT makes the views `NAME_events`, `NAME_blocks`... of another
export (two exports compared: `old=DAY1 new=DAY2`).
"""
import decimal
import json
import os
import sys

root = sys.argv[1]
queries = json.load(sys.stdin)
TABLES = ["events", "blocks", "processes", "stacks"]
# (view name, export root, table)
VIEWS = [(t, root, t) for t in TABLES]
for arg in sys.argv[2:]:
    name, other = arg.split("=", 1)
    VIEWS += [(f"{name}_{t}", other, t) for t in TABLES]


def norm(v):
    if isinstance(v, decimal.Decimal):
        return float(v)
    if isinstance(v, bool) or v is None or isinstance(v, (int, float, str)):
        return v
    return str(v)


out = {}

import duckdb

con = duckdb.connect()
for v, r, t in VIEWS:
    con.sql(f"create view {v} as select * from read_parquet('{r}/*/*/{t}.parquet', hive_partitioning = true)")
out["duckdb"] = {name: [[norm(v) for v in row] for row in con.sql(q).fetchall()] for name, q in queries}

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
from pyspark.sql import SparkSession

spark = (
    SparkSession.builder.master("local[2]")
    .appName("shim-fleet-test")
    .config("spark.ui.enabled", "false")
    .config("spark.ui.showConsoleProgress", "false")
    .config("spark.sql.shuffle.partitions", "4")
    .config("spark.driver.memory", "1g")
    .getOrCreate()
)
spark.sparkContext.setLogLevel("ERROR")
for v, r, t in VIEWS:
    spark.read.option("basePath", r).parquet(f"{r}/*/*/{t}.parquet").createOrReplaceTempView(v)
out["spark"] = {name: [[norm(v) for v in row] for row in spark.sql(q).collect()] for name, q in queries}
out["spark_version"] = spark.version
spark.stop()
print(json.dumps(out))
