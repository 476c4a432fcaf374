"""Loopback servers the weights-download tests fetch from: an HTTPS server with its own CA
(made here with `cryptography`), whose files misbehave on purpose (404, a body cut short every
time or once, Range ignored), and a server that accepts connections and never answers.
Not a test module."""
import datetime
import ipaddress
import pathlib
import socket
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


def make_ca_and_server_cert(out: pathlib.Path):
    """A CA and a certificate for 127.0.0.1 and localhost signed by it; returns (ca.pem,
    server.pem, server.key) paths."""
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "weights test CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(hours=1))
          .not_valid_after(now + datetime.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False, key_encipherment=False, data_encipherment=False,
                                       key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                                                        x509.DNSName("localhost")]), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .sign(ca_key, hashes.SHA256()))
    paths = out / "ca.pem", out / "server.pem", out / "server.key"
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return paths


class ZooFile:
    """A file the server holds and how it misbehaves: `cut_every_time` sends Content-Length
    and then half the body on every request (Range ignored); `cut_first` does that once, then
    honours Range; `ignore_range` answers every request with the whole file (200)."""

    def __init__(self, data: bytes, cut_every_time=False, cut_first=False, ignore_range=False):
        self.data, self.cut_every_time, self.cut_first, self.ignore_range = data, cut_every_time, cut_first, ignore_range


class ZooServer:
    """HTTPS on 127.0.0.1, a free port; `files` maps a path to a ZooFile; `requests` lists
    (path, Range header or None) as they came."""

    def __init__(self, cert: pathlib.Path, key: pathlib.Path):
        self.files, self.requests = {}, []
        zoo = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                zoo.requests.append((self.path, self.headers.get("Range")))
                served = zoo.files.get(self.path)
                if served is None:
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                first = len([p for p, _ in zoo.requests if p == self.path]) == 1
                start = 0
                wanted = self.headers.get("Range")
                if wanted and not served.ignore_range and not served.cut_every_time:
                    start = int(wanted.split("=")[1].split("-")[0])
                body = served.data[start:]
                self.send_response(206 if start else 200)
                if start:
                    self.send_header("Content-Range", f"bytes {start}-{len(served.data) - 1}/{len(served.data)}")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if served.cut_every_time or (served.cut_first and first):
                    self.wfile.write(body[:len(body) // 2])
                    self.wfile.flush()
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                self.wfile.write(body)

        class Server(ThreadingHTTPServer):
            def handle_error(self, request, client_address):
                pass  # clients that hang up on a cut body are the point, not news

        self.httpd = Server(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        self.httpd.socket = context.wrap_socket(self.httpd.socket, server_side=True)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def requests_for(self, path: str) -> list:
        return [r for r in self.requests if r[0] == path]

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


class _Listener:
    """A TCP listener on 127.0.0.1, a free port; each connection goes to `_accepted`."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self._accepted(conn)

    def close(self):
        self.sock.close()


class SilentServer(_Listener):
    """Accepts TCP connections and never sends a byte."""

    def __init__(self):
        self.held = []
        super().__init__()

    def _accepted(self, conn):
        self.held.append(conn)

    def close(self):
        super().close()
        for conn in self.held:
            conn.close()


class ConnectProxy(_Listener):
    """An HTTP proxy that only tunnels (CONNECT host:port), as https downloads use it;
    `targets` lists what it was asked to connect to."""

    def __init__(self):
        self.targets = []
        super().__init__()

    def _accepted(self, conn):
        threading.Thread(target=self._tunnel, args=(conn,), daemon=True).start()

    def _tunnel(self, client):
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = client.recv(4096)
            if not chunk:
                client.close()
                return
            head += chunk
        method, target = head.split(b" ")[:2]
        self.targets.append(target.decode())
        if method != b"CONNECT":
            client.sendall(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
            client.close()
            return
        host, port = target.decode().rsplit(":", 1)
        upstream = socket.create_connection((host, int(port)))
        client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        for a, b in ((client, upstream), (upstream, client)):
            threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(source, sink):
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for s in (source, sink):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
