#!/usr/bin/env python3
"""catalog_client.py - a raw client of the daemon socket for the catalog tests.

Speaks the line-delimited JSON protocol directly (docs/ipc.md), so tests can
send requests the real CLI never would (crafted params, paths).

usage: catalog_client.py HOME METHOD [PARAMS_JSON]      prints the reply object as JSON
       catalog_client.py HOME --fetch ID OUT            fetches an artifact (all chunks)
                                             into OUT, checks sha256, prints
                                             {"size":..,"sha256":..}
Exit 0 when the reply has "result", 3 when it has "error", 2 on usage or
transport problems.
"""
import base64, hashlib, json, os, socket, sys

class Client:
    def __init__(self, home):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.settimeout(30)
        self.s.connect(os.path.join(home, "daemon.sock"))
        self.buf = b""
        self.next_id = 1
        r = self.call("hello", {"protocol": 1, "client": "catalog-test"})
        if "result" not in r:
            raise SystemExit("hello failed: %r" % r)

    def call(self, method, params=None):
        rid = self.next_id
        self.next_id += 1
        msg = {"id": rid, "method": method, "params": params if params is not None else {}}
        self.s.sendall((json.dumps(msg) + "\n").encode())
        while True:
            while b"\n" not in self.buf:
                chunk = self.s.recv(1 << 20)
                if not chunk:
                    raise SystemExit("connection closed by the daemon")
                self.buf += chunk
            line, self.buf = self.buf.split(b"\n", 1)
            obj = json.loads(line)
            if obj.get("id") == rid:
                return obj

def main(argv):
    if len(argv) < 3:
        sys.stderr.write(__doc__)
        return 2
    c = Client(argv[1])
    if argv[2] == "--fetch":
        ident, out = argv[3], argv[4]
        data = b""
        size = sha = None
        while True:
            r = c.call("artifacts.fetch", {"id": ident, "offset": len(data)})
            if "error" in r:
                print(json.dumps(r))
                return 3
            res = r["result"]
            size, sha = res["size"], res["sha256"]
            data += base64.b64decode(res["data_base64"])
            if res["eof"]:
                break
        with open(out, "wb") as f:
            f.write(data)
        got = hashlib.sha256(data).hexdigest()
        if len(data) != size or got != sha:
            print(json.dumps({"error": "mismatch", "size": len(data), "sha256": got}))
            return 3
        print(json.dumps({"size": size, "sha256": sha}))
        return 0
    params = json.loads(argv[3]) if len(argv) > 3 else {}
    r = c.call(argv[2], params)
    print(json.dumps(r))
    return 0 if "result" in r else 3

if __name__ == "__main__":
    sys.exit(main(sys.argv))
