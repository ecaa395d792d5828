"""The voice the host trusts inside a code sandbox. Runs under the platform's own uid; never imported.

Runners report outcomes over a unix datagram socket, and the kernel stamps
each datagram with the sender's pid and uid (SCM_CREDENTIALS), which no
process can forge. An outcome counts only from the process registered as
its slot's runner. So a sample, which under gVisor can write to its own
runner's stdout, has no way to speak as its runner, and holds no secret
worth stealing: samples are forked from runners that hold none.

The host talks on stdin:  "expect SLOT": the next hello from SLOT's uid is
its new runner (sent only once no process of that uid is left). It reads on
stdout: "BV-EXPECTING SLOT", "BV-RUNNER SLOT", "BV-RESULT SLOT SEQ JSON".
"""

import ctypes
import os
import socket
import struct
import sys
import threading

ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0: nothing of another uid may open its descriptors
path, first_uid = sys.argv[1], int(sys.argv[2])
os.mkdir(os.path.dirname(path), 0o755)
server = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
server.bind(path)
os.chmod(path, 0o666)  # every slot's uid may send; who sent what is the kernel's word
server.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
lock = threading.Lock()
expecting: set[int] = set()
runners: dict[int, int] = {}  # pid -> slot


def say(line):
    with lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def commands():
    for line in sys.stdin:
        slot = int(line.split()[1])
        with lock:
            for pid in [pid for pid, s in runners.items() if s == slot]:
                del runners[pid]
            expecting.add(slot)
        say(f"BV-EXPECTING {slot}")
    os._exit(0)  # the host is gone


threading.Thread(target=commands, daemon=True).start()
say("BV-READY")
while True:
    data, ancillary, _, _ = server.recvmsg(65536, socket.CMSG_SPACE(12))
    credentials = [struct.unpack("3i", d) for level, kind, d in ancillary if kind == socket.SCM_CREDENTIALS]
    if not credentials or credentials[0][0] <= 0:
        continue  # a sender already gone (gVisor reports pid 0 for it)
    pid, uid, _ = credentials[0]
    if data == b"hello":
        slot = uid - first_uid
        with lock:
            if slot not in expecting:
                continue
            expecting.discard(slot)
            runners[pid] = slot
        say(f"BV-RUNNER {slot}")
    elif data.startswith(b"result "):
        with lock:
            slot = runners.get(pid)
        if slot is not None:
            say(f"BV-RESULT {slot} {data[7:].decode()}")
