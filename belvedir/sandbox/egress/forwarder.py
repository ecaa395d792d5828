"""The in-sandbox relay: 127.0.0.1:3128 → the egress proxy's unix socket.

Its source is sent to the sandbox's python3 with `-c` (no image change), run
under the keeper uid. It parses nothing: the proxy on the host decides.
Standard library only, one thread per direction, bounded by the sandbox's
own pids and memory limits. Before listening it writes the CA bundle clients
are pointed at (the image's plus the operator's), readable by the workload,
so one process start does both; "ready" on stdout says it listens.
"""

import os
import socket
import sys
import threading

SOCKET, PORT, IMAGE_BUNDLE, BUNDLE = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]

os.makedirs(os.path.dirname(BUNDLE), mode=0o755, exist_ok=True)
with open(BUNDLE, "w") as bundle:
    bundle.write(open(IMAGE_BUNDLE).read() + "\n" + os.environ.get("BELVEDIR_OPERATOR_CA", ""))
os.chmod(BUNDLE, 0o644)


def pump(source, target):
    try:
        while data := source.recv(65536):
            target.sendall(data)
    except OSError:
        pass
    finally:
        for sock, how in ((target, socket.SHUT_WR), (source, socket.SHUT_RD)):
            try:
                sock.shutdown(how)
            except OSError:
                pass


def serve(client):
    upstream = socket.socket(socket.AF_UNIX)
    try:
        upstream.connect(SOCKET)
    except OSError:
        client.close()
        return
    back = threading.Thread(target=pump, args=(upstream, client), daemon=True)
    back.start()
    pump(client, upstream)
    back.join()
    client.close()
    upstream.close()


listener = socket.socket()
listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
listener.bind(("127.0.0.1", PORT))
listener.listen(128)
print("ready", flush=True)
while True:
    connection, _ = listener.accept()
    threading.Thread(target=serve, args=(connection,), daemon=True).start()
