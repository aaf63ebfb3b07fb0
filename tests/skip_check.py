#!/usr/bin/env python3
"""Fails when a test of the suite was skipped for a package that `make deps` installs.

Reads the suite's results in DIR: the XML report of every gtest (--gtest_output=xml) and the
<test>.skip files of the launcher tests (tests/launch/common.sh). A skip whose reason says
"not installed" or "apt install", or names one of the Makefile's APT_PACKAGES, is a missing
package: a fresh machine gets it from `make test`, so the skip is a failure. Every other skip
(a machine limit: no IPv6, no network namespaces, one CPU; or a test skipped by design) is
allowed and listed with its reason.

Usage: skip_check.py DIR MAKEFILE. Exit 0, 1 on a package skip, 77 when DIR does not exist (the
suite's fixture creates it before the first test).
"""
import pathlib
import re
import sys
import xml.etree.ElementTree as ET

PACKAGE_WORDS = re.compile(r"not installed|apt(-get)? install")


def apt_packages(makefile):
    """The words of APT_PACKAGES := ... (with its continuation lines)."""
    text = pathlib.Path(makefile).read_text()
    m = re.search(r"^APT_PACKAGES\s*:?=((?:.*\\\n)*.*)$", text, re.M)
    if not m:
        sys.exit(f"skip_check: no APT_PACKAGES in {makefile}")
    return m.group(1).replace("\\\n", " ").split()


def skips(results):
    """(test, reason) of every skip recorded in the results folder, and the count of results."""
    found, count = [], 0
    for report in sorted(results.rglob("*.xml")):
        count += 1
        for case in ET.parse(report).iter("testcase"):
            skipped = case.find("skipped")
            if skipped is not None:
                reason = skipped.get("message", "").strip().splitlines()
                found.append((f"{case.get('classname')}.{case.get('name')}", reason[-1] if reason else ""))
    for note in sorted(results.rglob("*.skip")):
        count += 1
        found.append((note.stem, note.read_text().strip()))
    return found, count


def names_package(reason, packages):
    if PACKAGE_WORDS.search(reason):
        return True
    return any(re.search(rf"(?<![\w.+-]){re.escape(p)}(?![\w.+-])", reason) for p in packages)


def main():
    results, makefile = pathlib.Path(sys.argv[1]), sys.argv[2]
    packages = apt_packages(makefile)
    if not results.is_dir():
        print(f"SKIPPED: no folder {results} (skip_check runs after the suite)")
        return 77
    found, count = skips(results)
    missing = [(t, r) for t, r in found if names_package(r, packages)]
    allowed = [(t, r) for t, r in found if not names_package(r, packages)]
    print(f"skip_check: {count} results, {len(found)} skipped")
    for test, reason in allowed:
        print(f"  allowed (machine limit or by design): {test}: {reason}")
    for test, reason in missing:
        print(f"  MISSING PACKAGE: {test}: {reason}")
    if missing:
        print("skip_check: tests skipped for packages that `make deps` installs (APT_PACKAGES)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
