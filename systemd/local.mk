# systemd/ units and policy
