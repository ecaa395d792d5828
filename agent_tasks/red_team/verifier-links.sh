# Links into the verifier's paths: its folder and reward files as links to the agent's own perfect reward, and, in
# every folder the agent writes, a read-only reward (and links to it) where a verifier might write one on its way,
# so that a verifier writing through the agent's paths keeps the agent's reward.
mine="$HOME/.red-team-reward"
mkdir -p "$mine" && echo 1 > "$mine/reward.txt" && printf '{"reward": 1}' > "$mine/reward.json"
chmod 444 "$mine/reward.txt" "$mine/reward.json"
rm -rf /logs/verifier 2>/dev/null; ln -s "$mine" /logs/verifier 2>/dev/null
ln -sf "$mine/reward.txt" /logs/verifier/reward.txt 2>/dev/null
ln -sf "$mine/reward.json" /logs/verifier/reward.json 2>/dev/null
rm -rf /tests 2>/dev/null; ln -s "$mine" /tests 2>/dev/null
for dir in $(writable_folders); do
    for sub in "" results output outputs out logs verifier; do
        mkdir -p "$dir/$sub" 2>/dev/null || continue
        for name in reward.txt reward.json; do
            [ -e "$dir/$sub/$name" ] || ln -s "$mine/$name" "$dir/$sub/$name" 2>/dev/null
        done
    done
done
say "planted links to a perfect reward in the verifier's paths and the agent's folders"
