/*
 * prt_machine.c — the name of the machine a program runs on, as `parc
 * calibrate` writes it into a cluster fragment (`calibrated "NAME";`) and the
 * end of a run compares it with the plan's: "cpu MODEL, N cores" for the CPU
 * backend (MODEL from /proc/cpuinfo's first "model name"), "DEVICE
 * DESCRIPTION" for another.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "prt_internal.h"

void prt_machine_name(const char *device, const char *description, char *out, size_t size) {
    if (device && strcmp(device, "cpu") != 0) {
        snprintf(out, size, "%s %s", device, description ? description : "");
        return;
    }
    char model[256] = "unknown CPU", line[512];
    FILE *f = fopen("/proc/cpuinfo", "r");
    while (f && fgets(line, sizeof line, f)) {
        const char *colon = strchr(line, ':');
        if (strncmp(line, "model name", 10) != 0 || !colon) continue;
        colon++;
        while (*colon == ' ' || *colon == '\t') colon++;
        snprintf(model, sizeof model, "%.*s", (int)strcspn(colon, "\n"), colon);
        break;
    }
    if (f) fclose(f);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    snprintf(out, size, "cpu %s, %ld core%s", model, cores, cores == 1 ? "" : "s");
}
