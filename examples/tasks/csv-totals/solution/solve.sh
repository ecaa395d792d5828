#!/usr/bin/env bash
# The reference solution. TASK_ROOT defaults to the sandbox's /app.
set -eu
ROOT="${TASK_ROOT:-/app}"
python3 - "$ROOT" <<'EOF'
import csv, sys
from collections import defaultdict
root = sys.argv[1]
totals = defaultdict(int)
with open(f"{root}/sales.csv") as f:
    for row in csv.DictReader(f):
        totals[row["region"]] += int(row["amount"])
with open(f"{root}/totals.csv", "w") as f:
    f.write("region,total\n")
    for region in sorted(totals):
        f.write(f"{region},{totals[region]}\n")
EOF
