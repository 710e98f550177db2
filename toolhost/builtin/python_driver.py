# The driver of the built-in python tool's session (docs/TOOLS.md "Built-in tools"): one
# long-lived interpreter that runs the model's code blocks in one persistent namespace, like a
# notebook kernel. toolhost/builtin/pythontool.cpp starts the interpreter with a one-line
# bootstrap (-c) that reads one JSON line from stdin, {"driver": <this file>, "network": MODE},
# and runs this file with that object as NEURAL_CONFIG. MODE: "isolated" (the host put the process
# in an empty network namespace), "block" (no namespace: refuse sockets at the Python level),
# "allow".
#
# Protocol (the host's stdin/stdout are private to this driver; the code's own stdin reads
# nothing and its raw fd 1/2 output goes to the process's stderr, which the host collects):
#   host -> driver: "<n>\n" then n bytes of UTF-8 JSON {"code": str, "cap": int}
#   driver -> host: "NEURAL <n>\n" then n bytes of UTF-8 JSON; first a hello
#       {"hello": true, "version": "3.11.2", "network": "namespace" | "python" | "allowed"},
#   then one answer per code block:
#       {"stdout": str, "stderr": str, "error": str | null, "error_type": str | null,
#        "dropped": int}
import ast
import io
import json
import linecache
import os
import sys
import traceback

DRIVER_FILES = ("<string>", "<neural-driver>")  # the bootstrap and this file


class Capture(io.TextIOBase):
    """A text stream that keeps the first `cap` characters written and counts the rest."""

    def __init__(self, cap):
        super().__init__()
        self.parts = []
        self.size = 0
        self.cap = cap
        self.dropped = 0

    @property
    def encoding(self):
        return "utf-8"

    def writable(self):
        return True

    def isatty(self):
        return False

    def write(self, s):
        if not isinstance(s, str):
            raise TypeError("write() argument must be str, not " + type(s).__name__)
        room = self.cap - self.size
        if room > 0:
            kept = s[:room]
            self.parts.append(kept)
            self.size += len(kept)
        self.dropped += len(s) - max(0, min(room, len(s)))
        return len(s)

    def getvalue(self):
        return "".join(self.parts)


def block_network():
    """No network namespace: refuse sockets in Python (code using ctypes or a subprocess can
    still reach the network; docs/TOOLS.md says so)."""
    import socket

    def refuse(*args, **kwargs):
        raise PermissionError("network access is disabled for this Python session")

    class NoNetworkSocket(socket.socket):
        def connect(self, *args, **kwargs):
            refuse()

        def connect_ex(self, *args, **kwargs):
            refuse()

        def bind(self, *args, **kwargs):
            refuse()

        def sendto(self, *args, **kwargs):
            refuse()

    socket.socket = NoNetworkSocket
    socket.create_connection = refuse
    socket.getaddrinfo = refuse
    socket.gethostbyname = refuse
    socket.create_server = refuse


def user_traceback(etype, value, tb):
    if issubclass(etype, SyntaxError):
        # The code did not compile: the message and the caret, not the parser's frames.
        return "".join(traceback.format_exception_only(etype, value))
    # Leave out the driver's own frames: the model sees only its code's.
    while tb is not None and tb.tb_frame.f_code.co_filename in DRIVER_FILES:
        tb = tb.tb_next
    return "".join(traceback.format_exception(etype, value, tb))


def run_cell(code, namespace, name):
    linecache.cache[name] = (len(code), None, code.splitlines(True), name)
    tree = ast.parse(code, name, "exec")
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        # As in a notebook, the value of a final expression is shown.
        last = ast.Expression(tree.body.pop().value)
    exec(compile(tree, name, "exec"), namespace)
    if last is not None:
        value = eval(compile(last, name, "eval"), namespace)
        if value is not None:
            namespace["_"] = value
            print(repr(value))


def main():
    network = "allowed"
    mode = NEURAL_CONFIG.get("network")  # noqa: F821 (set by the bootstrap)
    if mode == "isolated":
        network = "namespace"
    elif mode == "block":
        block_network()
        network = "python"

    proto_in = os.fdopen(os.dup(0), "rb")
    proto_out = os.fdopen(os.dup(1), "wb")
    null_fd = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null_fd, 0)
    os.close(null_fd)
    os.dup2(2, 1)
    sys.stdin = open(os.devnull, "r")

    def send(obj):
        data = json.dumps(obj).encode("utf-8")
        proto_out.write(b"NEURAL %d\n" % len(data))
        proto_out.write(data)
        proto_out.flush()

    version = "%d.%d.%d" % sys.version_info[:3]
    send({"hello": True, "version": version, "network": network})

    namespace = {"__name__": "__main__", "__builtins__": __builtins__}
    cell = 0
    while True:
        header = proto_in.readline()
        if not header:
            return
        request = json.loads(proto_in.read(int(header)).decode("utf-8"))
        cell += 1
        out = Capture(request.get("cap", 1 << 20))
        err = Capture(request.get("cap", 1 << 20))
        error = None
        error_type = None
        saved = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = out, err
        try:
            run_cell(request["code"], namespace, "<cell %d>" % cell)
        except BaseException:
            etype, value, tb = sys.exc_info()
            error_type = etype.__name__
            try:
                error = user_traceback(etype, value, tb)
            except BaseException:
                error = "%s: %s\n" % (error_type, value)
            del tb
        finally:
            sys.stdout, sys.stderr = saved
        send({"stdout": out.getvalue(), "stderr": err.getvalue(), "error": error,
              "error_type": error_type, "dropped": out.dropped + err.dropped})


main()
