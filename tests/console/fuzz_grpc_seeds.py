# tests/console/fuzz_grpc_seeds.py - regenerates tests/console/fuzz_grpc_seeds/ (the
# committed seeds of fuzz_grpc.c) with python3-h2: /usr/bin/python3 fuzz_grpc_seeds.py DIR
import h2.connection, h2.config, sys, os
out = sys.argv[1]
P = "/rs.tokio.console.instrument.Instrument/"
def frame(data):  # chunks of <=255 bytes, as fuzz_grpc.c reads them
    b = b""
    for i in range(0, len(data), 254):  # even lengths: the server's output is read
        c = data[i:i+254]
        b += bytes([len(c)]) + c
    return b
def req(method, body=b"\x00\x00\x00\x00\x00", n=1, end=True):
    c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    c.initiate_connection()
    for i in range(n):
        if isinstance(method, list): method_i = method[i]
        else: method_i = method
        sid = c.get_next_available_stream_id()
        c.send_headers(sid, [(":method", "POST"), (":scheme", "http"), (":authority", "x"),
                             (":path", P + method_i), ("content-type", "application/grpc"), ("te", "trailers")])
        c.send_data(sid, body, end_stream=end)
    return c.data_to_send()
seeds = {
    "updates": req("WatchUpdates"),
    "state": req("WatchState"),
    "details": req("WatchTaskDetails", b"\x00\x00\x00\x00\x04\x0a\x02\x08\x01"),
    "pause": req(["Pause", "WatchState", "Resume"], n=3),
    "many": req("WatchUpdates", n=20),
    "unknown": req("Nope"),
    "oversize": req("WatchState", b"\x00\x00\x00\x10\x00" + b"x" * 5000),
    "halfopen": req("WatchUpdates", end=False),
}
for k, v in seeds.items():
    open(os.path.join(out, k), "wb").write(frame(v))
open(os.path.join(out, "preface-only"), "wb").write(frame(req("WatchState")[:24 + 9]))
