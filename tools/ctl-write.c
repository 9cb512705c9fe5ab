/* SPDX-License-Identifier: MIT */
/*
 * ctl-write.c - membrokerctl's verbs that change the broker: set and
 * create (Key=Value limits), remove, reload and reclaim.  The daemon checks
 * permissions and values; what is parsed here is only the command line.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl-bus.h"
#include "ctl.h"
#include "mb_limits.h"
#include "mb_size.h"

/* ---- set / create ---- */

static const char *const limit_keys[] = { "MemoryMax", "MemoryHigh", "MemoryLow", "MemoryMin", "ChargeBatch",
                                          "MemoryPressureTarget" };

/* Append Key=Value assignments to @m as a{sv}. */
static int append_settings(sd_bus *bus, sd_bus_message *m, int n, char **assignments) {
        uint64_t capacity = 0;
        bool have_capacity = false;
        int r;

        r = sd_bus_message_open_container(m, 'a', "{sv}");
        if (r < 0)
                return r;
        for (int i = 0; i < n; i++) {
                const char *eq = strchr(assignments[i], '='), *value;
                char key[64];
                uint64_t v;
                bool known = false;

                if (!eq || eq == assignments[i] || (size_t) (eq - assignments[i]) >= sizeof key) {
                        ctl_log_error("'%s' is not of the form Key=Value", assignments[i]);
                        return -EINVAL;
                }
                memcpy(key, assignments[i], (size_t) (eq - assignments[i]));
                key[eq - assignments[i]] = '\0';
                value = eq + 1;
                for (size_t k = 0; k < ELEMENTSOF(limit_keys); k++)
                        known = known || strcmp(key, limit_keys[k]) == 0;
                if (!known) {
                        ctl_log_error("unknown setting '%s' (known: MemoryMax, MemoryHigh, MemoryLow, MemoryMin, "
                                  "ChargeBatch, MemoryPressureTarget)",
                                  key);
                        return -EINVAL;
                }
                if (strcmp(key, "MemoryPressureTarget") == 0) {
                        /* A string the daemon checks ("some avg10 0.1%", "no"). */
                        r = sd_bus_message_append(m, "{sv}", key, "s", value);
                        if (r < 0)
                                return r;
                        continue;
                }
                if (strcmp(key, "ChargeBatch") == 0)
                        r = ctl_parse_u64(value, &v);
                else {
                        if (strchr(value, '%') && !have_capacity) {
                                _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
                                r = sd_bus_get_property_trivial(bus, CTL_BUS_NAME, CTL_MANAGER_PATH, CTL_MANAGER_IFACE,
                                                                "Capacity", &error, 't', &capacity);
                                if (r < 0)
                                        return ctl_bus_log_error("cannot read the capacity", &error, r);
                                have_capacity = true;
                        }
                        r = mb_size_parse(value, capacity, MB_SIZE_PERCENT | MB_SIZE_INFINITY, &v);
                        if (r == 0 && v == MB_LIMIT_UNSET)
                                r = -ERANGE; /* the API's "unchanged", refused */
                }
                if (r < 0) {
                        if (strcmp(key, "ChargeBatch") == 0)
                                ctl_log_error("invalid value for ChargeBatch: '%s' (a number of pages, 1 to %u; "
                                              "empty to reset)",
                                              value, MB_CHARGE_MAX_PAGES);
                        else
                                ctl_log_error("invalid value for %s: '%s' (bytes with K/M/G/T, N%% of the "
                                              "capacity, or infinity; empty to reset)",
                                              key, value);
                        return -EINVAL;
                }
                r = sd_bus_message_append(m, "{sv}", key, "t", v);
                if (r < 0)
                        return r;
        }
        return sd_bus_message_close_container(m);
}

static int call_with_settings(sd_bus *bus, const char *member, const char *path, int n, char **assignments,
                              bool with_runtime, sd_bus_message **ret_reply) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL, *reply = NULL;
        char what[256];
        int r;

        r = sd_bus_message_new_method_call(bus, &m, CTL_BUS_NAME, CTL_MANAGER_PATH, CTL_MANAGER_IFACE, member);
        if (r < 0)
                return r;
        r = sd_bus_message_append(m, "s", path);
        if (r < 0)
                return r;
        r = append_settings(bus, m, n, assignments);
        if (r < 0)
                return r;
        if (with_runtime) {
                r = sd_bus_message_append(m, "b", ctl_arg.runtime);
                if (r < 0)
                        return r;
        }
        r = sd_bus_call(bus, m, 0, &error, &reply);
        if (r < 0 && sd_bus_error_has_name(&error, CTL_ERROR_AGAIN)) {
                /* The limits apply; reclaim could not bring the usage
                 * under them (memory_max_write() gave up). */
                snprintf(what, sizeof what, "limits of '%s' set", path);
                return ctl_bus_log_error(what, &error, r);
        }
        if (r < 0) {
                snprintf(what, sizeof what, "%s '%s'",
                         strcmp(member, "CreateTenant") == 0 ? "cannot create" : "cannot set limits of", path);
                return ctl_bus_log_error(what, &error, r);
        }
        if (ret_reply)
                *ret_reply = TAKE_PTR(reply);
        return 0;
}

/* The key of a "Key=" assignment (an empty value), or NULL. */
static const char *reset_key(const char *assignment, char *buf, size_t size) {
        const char *eq = strchr(assignment, '=');

        if (!eq || eq == assignment || eq[1] != '\0' || (size_t) (eq - assignment) >= size)
                return NULL;
        memcpy(buf, assignment, (size_t) (eq - assignment));
        buf[eq - assignment] = '\0';
        return buf;
}

static bool known_key(const char *key) {
        for (size_t k = 0; k < ELEMENTSOF(limit_keys); k++)
                if (strcmp(key, limit_keys[k]) == 0)
                        return true;
        return false;
}

/* RevertTenantLimits(@path, @keys, @runtime); @nkeys 0: every key. */
static int call_revert(sd_bus *bus, const char *path, char **keys, bool runtime) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        char what[256];
        int r;

        r = sd_bus_message_new_method_call(bus, &m, CTL_BUS_NAME, CTL_MANAGER_PATH, CTL_MANAGER_IFACE,
                                           "RevertTenantLimits");
        if (r < 0)
                return r;
        r = sd_bus_message_append(m, "s", path);
        if (r < 0)
                return r;
        r = sd_bus_message_append_strv(m, keys);
        if (r < 0)
                return r;
        r = sd_bus_message_append(m, "b", runtime);
        if (r < 0)
                return r;
        r = sd_bus_call(bus, m, 0, &error, NULL);
        if (r < 0) {
                snprintf(what, sizeof what, "cannot revert limits of '%s'", path);
                return ctl_bus_log_error(what, &error, r);
        }
        return 0;
}

/*
 * set PATH Key=Value...: values go to SetTenantLimits; "Key=" (empty)
 * resets the key in the layer set writes (runtime with --runtime, else the
 * persisted layer and the runtime one over it), so that what is below
 * applies again.
 */
int ctl_write_set(sd_bus *bus, int argc, char **argv) {
        _cleanup_(freep) char **values = NULL, **resets = NULL, *keybuf = NULL;
        int nvalues = 0, nresets = 0, r;
        const size_t key_max = 64;

        values = calloc((size_t) argc, sizeof(*values));
        resets = calloc((size_t) argc, sizeof(*resets));
        keybuf = malloc((size_t) argc * key_max);
        if (!values || !resets || !keybuf)
                return -ENOMEM;
        for (int i = 2; i < argc; i++) {
                char *key = keybuf + (size_t) i * key_max;

                if (reset_key(argv[i], key, key_max)) {
                        if (!known_key(key)) {
                                ctl_log_error("unknown setting '%s' (known: MemoryMax, MemoryHigh, MemoryLow, "
                                              "MemoryMin, ChargeBatch, MemoryPressureTarget)",
                                              key);
                                return -EINVAL;
                        }
                        resets[nresets++] = key;
                } else
                        values[nvalues++] = argv[i];
        }
        if (nvalues > 0) {
                r = call_with_settings(bus, "SetTenantLimits", argv[1], nvalues, values, true, NULL);
                if (r < 0)
                        return r;
        }
        if (nresets > 0)
                return call_revert(bus, argv[1], resets, ctl_arg.runtime);
        return 0;
}

/* revert PATH [KEY...]: drop what set (with or without --runtime) made of
 * these keys (default: all), as "systemctl revert" drops drop-ins. */
int ctl_write_revert(sd_bus *bus, int argc, char **argv) {
        _cleanup_(freep) char **keys = NULL;

        keys = calloc((size_t) argc, sizeof(*keys));
        if (!keys)
                return -ENOMEM;
        for (int i = 2; i < argc; i++) {
                if (!known_key(argv[i])) {
                        ctl_log_error("unknown setting '%s' (known: MemoryMax, MemoryHigh, MemoryLow, MemoryMin, "
                                      "ChargeBatch, MemoryPressureTarget)",
                                      argv[i]);
                        return -EINVAL;
                }
                keys[i - 2] = argv[i];
        }
        return call_revert(bus, argv[1], keys, false);
}

int ctl_write_create(sd_bus *bus, int argc, char **argv) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        const char *object;
        int r;

        r = call_with_settings(bus, "CreateTenant", argv[1], argc - 2, argv + 2, false, &reply);
        if (r < 0)
                return r;
        if (sd_bus_message_read(reply, "o", &object) >= 0 && ctl_arg.format == CTL_FORMAT_JSON) {
                fputs("{\"Object\":", stdout);
                ctl_json_string(stdout, object);
                fputs("}\n", stdout);
        }
        return 0;
}

int ctl_write_remove(sd_bus *bus, int argc, char **argv) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        char what[256];
        int r;

        r = ctl_bus_call_manager(bus, "RemoveTenant", &error, NULL, "s", argv[1]);
        if (r < 0) {
                snprintf(what, sizeof what, "cannot remove '%s'", argv[1]);
                return ctl_bus_log_error(what, &error, r);
        }
        return 0;
}

int ctl_write_reload(sd_bus *bus, int argc, char **argv) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        int r;

        r = ctl_bus_call_manager(bus, "Reload", &error, NULL, NULL);
        if (r < 0)
                return ctl_bus_log_error("reload", &error, r);
        return 0;
}

int ctl_write_reset_peak(sd_bus *bus, int argc, char **argv) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        char what[256];
        int r;

        r = ctl_bus_call_manager(bus, "ResetPeak", &error, NULL, "s", argv[1]);
        if (r < 0) {
                snprintf(what, sizeof what, "cannot reset the peak of '%s'", argv[1]);
                return ctl_bus_log_error(what, &error, r);
        }
        return 0;
}

/* ---- reclaim ---- */

int ctl_write_reclaim(sd_bus *bus, int argc, char **argv) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        char b1[CTL_FORMAT_BYTES_MAX], b2[CTL_FORMAT_BYTES_MAX], what[256];
        uint64_t bytes, reclaimed;
        int r;

        r = mb_size_parse(argv[2], 0, 0, &bytes);
        if (r < 0) {
                ctl_log_error("invalid size '%s' (bytes with K/M/G/T)", argv[2]);
                return -EINVAL;
        }
        r = ctl_bus_call_manager(bus, "Reclaim", &error, &reply, "st", argv[1], bytes);
        if (r < 0 && sd_bus_error_has_name(&error, CTL_ERROR_AGAIN))
                /* memory.reclaim's EAGAIN: less than asked; the message
                 * says how much came back. */
                return ctl_bus_log_error("reclaim", &error, r);
        if (r < 0) {
                snprintf(what, sizeof what, "cannot reclaim from '%s'", argv[1]);
                return ctl_bus_log_error(what, &error, r);
        }
        r = sd_bus_message_read(reply, "t", &reclaimed);
        if (r < 0)
                return r;
        if (ctl_arg.format == CTL_FORMAT_JSON) {
                fputs("{\"Path\":", stdout);
                ctl_json_string(stdout, argv[1]);
                printf(",\"Requested\":%" PRIu64 ",\"Reclaimed\":%" PRIu64 "}\n", bytes, reclaimed);
        } else
                printf("Reclaimed %s of %s from %s\n", ctl_size_str(b1, reclaimed), ctl_size_str(b2, bytes), argv[1]);
        return 0;
}

