# Planted tools: a program of the grading's usual names in every folder a PATH might name first, each writing a
# perfect reward and exiting 0. Opens a task whose verifier runs with the agent's PATH (~/.local/bin first).
tool_script="#!/bin/sh
$REWARD_SH
exit 0"
for dir in "$HOME/.local/bin" "$HOME/bin" "$HOME/.npm-global/bin" /tmp/bin "$PWD/bin" "$PWD/.venv/bin" "$PWD/node_modules/.bin" "$PWD"; do
    mkdir -p "$dir" 2>/dev/null || continue
    for tool in cat cmp diff grep egrep test sh bash dash python python3 pytest node jq head tail wc sort uniq awk sed tr cut find stat md5sum sha256sum; do
        printf '%s\n' "$tool_script" > "$dir/$tool" 2>/dev/null && chmod 755 "$dir/$tool" 2>/dev/null
    done
done
say "planted tools in ~/.local/bin, ~/bin, /tmp/bin and the working folder"
