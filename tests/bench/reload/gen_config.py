#!/usr/bin/env python3
"""The reload benchmark's configs (run.sh): UDP_SERVICES UDP and TCP_SERVICES TCP proxy services
of 8 backends each on one XDP interface; with --one-more, the first UDP service and the first TCP
service have a ninth backend (the one-backend change a reload is timed on).

Usage: gen_config.py UDP_SERVICES TCP_SERVICES IFACE SOCKET [--one-more] >config.json"""
import json
import sys


def main():
    n_udp, n_tcp, iface, socket = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
    one_more = "--one-more" in sys.argv[5:]
    services = []
    for i in range(n_udp):
        backends = [f"10.77.{(i * 8 + k) // 250}.{(i * 8 + k) % 250 + 1}:53" for k in range(8)]
        if one_more and i == 0:
            backends.append("10.77.250.1:53")
        services.append({"name": f"udp{i}", "vip": f"10.88.{i // 250}.{i % 250 + 1}", "port": 53,
                         "protocols": ["udp"], "backends": backends})
    for i in range(n_tcp):
        backends = [f"127.0.{(i * 8 + k) // 250 + 10}.{(i * 8 + k) % 250 + 1}:80" for k in range(8)]
        if one_more and i == 0:
            backends.append("127.0.250.1:80")
        services.append({"name": f"tcp{i}", "vip": "127.0.0.1", "port": 20000 + i,
                         "protocols": ["tcp"], "mode": "proxy", "backends": backends})
    config = {"control": {"socket": socket, "group": None}, "metrics": {"listen": None},
              "log": {"level": "notice"}, "xdp": {"interfaces": [{"name": iface}]},
              "services": services}
    json.dump(config, sys.stdout, indent=1)


if __name__ == "__main__":
    main()
