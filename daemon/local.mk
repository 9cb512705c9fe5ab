# membrokerd (owned by the broker work; bus sources come from daemon/bus.mk)
