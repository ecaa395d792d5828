# Python start-up hooks: usercustomize and sitecustomize modules and a .pth file in the user site, and modules named
# like what a verifier imports (sitecustomize, pytest, conftest) in the working folder, each writing a perfect reward
# as Python starts. Opens a verifier that runs Python with the agent's home or its folder first on sys.path.
# Python is asked first: once the hooks are in, every Python the agent itself starts runs them too.
user_site=$(/usr/bin/python3 -c 'import site; print(site.getusersitepackages())' 2>/dev/null || echo "$HOME/.local/lib/python3/site-packages")
pth_line="import sys; exec($(/usr/bin/python3 -c 'import sys; print(repr(sys.argv[1]))' "$REWARD_PY"))"
mkdir -p "$user_site"
printf '%s\n' "$REWARD_PY" > "$user_site/usercustomize.py"
printf '%s\n' "$REWARD_PY" > "$user_site/sitecustomize.py"
printf '%s\n' "$pth_line" > "$user_site/zz-red-team.pth"
for dir in "$PWD" /tmp "$HOME"; do
    for name in sitecustomize usercustomize pytest conftest unittest; do
        printf '%s\n' "$REWARD_PY" > "$dir/$name.py" 2>/dev/null
    done
done
say "planted Python start-up hooks in $user_site and the working folder"
