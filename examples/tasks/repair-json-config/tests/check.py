import json
import sys

with open(sys.argv[1]) as f:
    config = json.load(f)
assert config == {"name": "inventory", "port": 8080, "debug": False}
assert type(config["port"]) is int
