"""An SMTP sink for gpuwatch's email tests, on Debian's python3-aiosmtpd.

Run it with /usr/bin/python3 (Debian's packages belong to that one):

    sink.py --dir DIR --port PORT [--starttls CERT KEY | --implicit-tls CERT KEY]
            [--auth USER:PASSWORD [--auth-echo]] [--reject "550 5.7.1 why"]
            [--fail-first N --fail-reply "451 4.3.0 why"] [--hang-first N]

Every DATA command is recorded as DIR/attempts.jsonl (one JSON line:
number, whether the session was encrypted, envelope sender and recipients,
the reply given); every accepted message is stored as DIR/NNNN.eml, written
to a temporary name and renamed, so a reader never sees half a file.
A failed AUTH is answered 535; with --auth-echo that reply quotes what the
client sent (the AUTH line's base64 and the password), as a careless server
might, for the tests that check gpuwatch keeps it out of its log and outbox.
Replies: --reject answers every message with that reply; --fail-first
answers the first N messages with --fail-reply, then accepts;
--hang-first holds the first N messages for 30 s without a reply (then
answers 451), for client timeouts. Prints
"READY <port>" once it listens and runs until it gets SIGTERM or SIGINT;
stop and start it again on the same --dir and --port to simulate an outage
(the message numbers go on from the files already there).
"""

import argparse
import asyncio
import base64
import json
import os
import signal
import ssl
import sys
import threading

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword


class Sink:
    def __init__(self, directory, reject, fail_first, fail_reply, hang_first):
        self.directory = directory
        self.hang_first = hang_first
        self.reject = reject
        self.fail_first = fail_first
        self.fail_reply = fail_reply
        self.lock = threading.Lock()
        self.attempts = self._count_attempts()

    def _count_attempts(self):
        path = os.path.join(self.directory, "attempts.jsonl")
        if not os.path.exists(path):
            return 0
        with open(path, encoding="utf-8") as f:
            return sum(1 for _ in f)

    async def handle_DATA(self, server, session, envelope):
        with self.lock:
            self.attempts += 1
            number = self.attempts
            if number <= self.hang_first:
                reply = "hang"
            elif self.reject:
                reply = self.reject
            elif number <= self.fail_first:
                reply = self.fail_reply
            else:
                reply = "250 2.0.0 Stored"
            if reply.startswith("250"):
                name = os.path.join(self.directory, "%04d.eml" % number)
                with open(name + ".tmp", "wb") as f:
                    f.write(envelope.original_content or envelope.content)
                os.replace(name + ".tmp", name)
            record = {
                "number": number,
                "tls": session.ssl is not None
                or server.transport.get_extra_info("ssl_object") is not None,
                "auth": session.authenticated,
                "mail_from": envelope.mail_from,
                "rcpt_tos": envelope.rcpt_tos,
                "reply": reply,
            }
            with open(os.path.join(self.directory, "attempts.jsonl"), "a", encoding="utf-8") as f:
                f.write(json.dumps(record) + "\n")
        if reply == "hang":
            await asyncio.sleep(30)
            return "451 4.4.2 Held too long"
        return reply


def context(cert, key):
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(cert, key)
    return ctx


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--dir", required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--starttls", nargs=2, metavar=("CERT", "KEY"))
    p.add_argument("--implicit-tls", nargs=2, metavar=("CERT", "KEY"))
    p.add_argument("--auth", metavar="USER:PASSWORD")
    p.add_argument("--auth-echo", action="store_true")
    p.add_argument("--reject")
    p.add_argument("--fail-first", type=int, default=0)
    p.add_argument("--fail-reply", default="451 4.3.0 Try again later")
    p.add_argument("--hang-first", type=int, default=0)
    a = p.parse_args()
    os.makedirs(a.dir, exist_ok=True)

    kwargs = {}
    if a.starttls:
        kwargs["tls_context"] = context(*a.starttls)
        kwargs["require_starttls"] = False
    if a.implicit_tls:
        kwargs["ssl_context"] = context(*a.implicit_tls)
    if a.auth:
        user, password = a.auth.split(":", 1)

        def authenticator(server, session, envelope, mechanism, data):
            ok = (
                isinstance(data, LoginPassword)
                and data.login.decode() == user
                and data.password.decode() == password
            )
            message = None
            if not ok and a.auth_echo and isinstance(data, LoginPassword):
                if mechanism == "PLAIN":
                    sent = base64.b64encode(b"\0" + data.login + b"\0" + data.password)
                else:
                    sent = base64.b64encode(data.password)
                message = "535 5.7.8 Authentication failed for AUTH %s %s (password %s)" % (
                    mechanism,
                    sent.decode(),
                    data.password.decode(errors="replace"),
                )
            return AuthResult(success=ok, handled=False, message=message)

        kwargs["authenticator"] = authenticator
        kwargs["auth_required"] = True
    else:
        kwargs["auth_require_tls"] = False

    handler = Sink(a.dir, a.reject, a.fail_first, a.fail_reply, a.hang_first)
    controller = Controller(handler, hostname="127.0.0.1", port=a.port, **kwargs)
    controller.start()
    print("READY %d" % a.port, flush=True)

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    stop.wait()
    controller.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
