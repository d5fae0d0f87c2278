#!/usr/bin/env python3
"""feedback_server.py - a loopback HTTP server receiving feedback uploads.

usage: feedback_server.py MODE PORTFILE OUTDIR
  MODE   ok         answer every POST with 200
         fail-first answer the first POST with 500, then 200
         hang       accept the connection but never answer
  Writes the port it listens on (127.0.0.1, chosen by the kernel) to
  PORTFILE. Each POST is parsed as multipart/form-data and saved as
  OUTDIR/<n>/<part name>[-<filename>], plus OUTDIR/<n>/status (what was
  answered) and OUTDIR/requests (one line per request: its number and the
  status answered).
"""
import email.parser, email.policy, os, sys, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODE, PORTFILE, OUTDIR = sys.argv[1], sys.argv[2], sys.argv[3]
lock = threading.Lock()
count = [0]

class H(BaseHTTPRequestHandler):
    def log_message(self, fmt, *args):
        sys.stderr.write("server: " + (fmt % args) + "\n")

    def do_POST(self):
        with lock:
            count[0] += 1
            n = count[0]
        if MODE == "hang":
            with open(os.path.join(OUTDIR, "requests"), "a") as f:
                f.write("%d hang\n" % n)
            time.sleep(3600)
            return
        length = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(length)
        status = 500 if (MODE == "fail-first" and n == 1) else 200
        d = os.path.join(OUTDIR, str(n))
        os.makedirs(d, exist_ok=True)
        msg = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
            b"Content-Type: " + self.headers["Content-Type"].encode() + b"\r\n\r\n" + body)
        names = []
        for part in msg.iter_parts():
            cd = part.get("Content-Disposition", "")
            params = dict(part.get_params(header="content-disposition") or [])
            name = params.get("name", "unnamed")
            fname = params.get("filename")
            out = name + ("-" + fname if fname else "")
            with open(os.path.join(d, out), "wb") as f:
                f.write(part.get_payload(decode=True) or b"")
            names.append(out)
        with open(os.path.join(d, "status"), "w") as f:
            f.write("%d\n" % status)
        with open(os.path.join(OUTDIR, "requests"), "a") as f:
            f.write("%d %d %s\n" % (n, status, ",".join(names)))
        self.send_response(status)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
srv.daemon_threads = True
with open(PORTFILE + ".tmp", "w") as f:
    f.write(str(srv.server_address[1]))
os.rename(PORTFILE + ".tmp", PORTFILE)
srv.serve_forever()
