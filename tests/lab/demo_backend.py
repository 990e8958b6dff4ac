#!/usr/bin/env python3
"""One demo backend: a UDP echo on PORT_UDP, a TCP response server on PORT_TCP and a TCP port the
health checks connect to. Every answer starts with the backend's name so the client can count
which backend served it.

    demo_backend.py NAME ADDRESS [--udp 5353] [--tcp 8080]

TCP protocol: the client sends lines "GET <bytes>\\n"; each is answered with "<name>\\n" followed by
exactly <bytes> bytes. UDP: each datagram is answered with b"<name>:" + the datagram.
Runs until killed."""
import argparse
import socket
import socketserver
import sys
import threading


def serve_udp(name, address, port):
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((address, port))
    prefix = name.encode() + b":"
    while True:
        data, peer = sock.recvfrom(2048)
        sock.sendto(prefix + data, peer)


class TcpHandler(socketserver.StreamRequestHandler):
    name = b"?"

    def handle(self):
        chunk = b"x" * 65536
        for line in self.rfile:
            parts = line.split()
            if len(parts) != 2 or parts[0] != b"GET" or not parts[1].isdigit():
                return
            left = min(int(parts[1]), 64 << 20)
            self.wfile.write(self.name + b"\n")
            while left > 0:
                piece = chunk[: min(left, len(chunk))]
                self.wfile.write(piece)
                left -= len(piece)
            self.wfile.flush()


class Server(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True

    def handle_error(self, request, client_address):
        # A client (the proxy, for its client) that goes away mid-response resets the
        # connection: normal for a server, not worth a traceback in the demo's output.
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


def serve_health(address, port):
    """The TCP side of the UDP port, so a TCP connect health check sees the backend alive."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((address, port))
    sock.listen(64)
    while True:
        conn, _ = sock.accept()
        conn.close()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("name")
    parser.add_argument("address")
    parser.add_argument("--udp", type=int, default=5353)
    parser.add_argument("--tcp", type=int, default=8080)
    args = parser.parse_args()
    TcpHandler.name = args.name.encode()
    threading.Thread(target=serve_udp, args=(args.name, args.address, args.udp), daemon=True).start()
    threading.Thread(target=serve_health, args=(args.address, args.udp), daemon=True).start()
    with Server((args.address, args.tcp), TcpHandler) as server:
        server.serve_forever()


if __name__ == "__main__":
    main()
