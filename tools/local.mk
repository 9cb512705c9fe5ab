# membrokerctl (owned by the D-Bus work)
