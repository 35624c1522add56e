"""``kafka-features.sh``: describe, upgrade, downgrade and disable finalized features, and the
version-mapping / feature-dependencies look-ups, with Apache Kafka 4.1's FeatureCommand flags,
output lines and exit codes.

describe reads ApiVersions (Kafka's describeFeatures); the changes are one UpdateFeatures (57)
request, sent to any broker (which forwards it) or to the active controller
(``--bootstrap-controller``). Every feature's result is printed ("<f> was upgraded to <n>.",
"Could not upgrade <f> to <n>. <why>"), then a failure count on stderr and exit 1 if any failed.
Bad command lines get argparse4j's usage and error (exit 1); other errors one line on stderr.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Final, TextIO

from broker.cli.admin import CommandError, code, code_name, optional_config
from broker.cli.cluster_admin import ClusterAdmin, addresses
from broker.cli.kafka_args import KafkaParser
from broker.cli.tool_exit import parse_and_run
from broker.metadata.features import (
    DEPENDENCIES,
    FEATURES,
    LATEST_MV,
    METADATA_VERSION,
    MINIMUM_MV,
    MV_NAMES,
    default_levels,
    mv_level,
    mv_name,
)

API_VERSIONS, UPDATE_FEATURES = 18, 57
UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 1, 2, 3
TOOL: Final = "kafka-features"


class Terse(Exception):
    """Kafka's TerseException: its message alone on stderr, exit 1."""


def _parser() -> argparse.ArgumentParser:
    p = KafkaParser(prog=TOOL, description="This tool manages feature flags in Kafka.")
    boot = p.add_mutually_exclusive_group(required=True)
    boot.add_argument(
        "--bootstrap-server",
        help="A comma-separated list of host:port pairs to use for establishing the "
        "connection to the Kafka cluster.",
    )
    boot.add_argument(
        "--bootstrap-controller",
        help="A comma-separated list of host:port pairs to use for establishing the "
        "connection to the KRaft quorum.",
    )
    p.add_argument(
        "--command-config", help="Property file containing configs to be passed to Admin Client."
    )
    sub = p.add_subparsers(dest="command", parser_class=KafkaParser, required=True)
    sub.add_parser("describe", help="Describes the current active feature flags.")
    for op in ("upgrade", "downgrade"):
        s = sub.add_parser(op, help=f"{op.capitalize()} one or more feature flags.")
        s.add_argument(
            "--metadata",
            help=f"DEPRECATED -- The level to which we should {op} the metadata. "
            "For example, 3.3-IV3.",
        )
        s.add_argument(
            "--release-version",
            help=f"The release version to {op} all features to. For example, 4.1-IV1.",
        )
        s.add_argument(
            "--feature",
            action="append",
            help=f"A feature {op} we should perform, in feature=level format.",
        )
        if op == "downgrade":
            s.add_argument(
                "--unsafe",
                action="store_true",
                help="Perform this downgrade even if it may irreversibly destroy metadata.",
            )
        s.add_argument("--dry-run", action="store_true", help=f"Validate this {op}.")
    d = sub.add_parser(
        "disable",
        help="Disable one or more feature flags. This is the same as downgrading the version "
        "to zero.",
    )
    d.add_argument("--feature", action="append", help="A feature flag to disable.")
    d.add_argument("--unsafe", action="store_true", help="Disable even if it may destroy metadata.")
    d.add_argument("--dry-run", action="store_true", help="Perform a dry-run of this disable.")
    v = sub.add_parser(
        "version-mapping",
        help="Look up the corresponding features for a given metadata version.",
    )
    v.add_argument(
        "--release-version",
        help=f"The release version to use for the corresponding feature mapping. The minimum "
        f"is {mv_name(MINIMUM_MV)}; the default is {mv_name(LATEST_MV)}",
    )
    f = sub.add_parser("feature-dependencies", help="Look up dependencies for a feature version.")
    f.add_argument("--feature", action="append", required=True, help="feature=version")
    return p


def level_text(feature: str, level: int) -> str:
    if feature == METADATA_VERSION:
        return MV_NAMES.get(level, f"UNKNOWN {level}")
    return str(level)


def _supported_mvs() -> str:
    return ", ".join(MV_NAMES[lvl] for lvl in sorted(MV_NAMES))


def _short(text: str) -> int | None:
    try:
        value = int(text.strip())
    except ValueError:
        return None
    return value if -32768 <= value <= 32767 else None


def name_and_level(text: str) -> tuple[str, int]:
    name, sep, level = text.partition("=")
    if not sep:
        raise Terse(f"Can't parse feature=level string {text}: equals sign not found.")
    value = _short(level)
    if value is None:
        raise Terse(
            f"Can't parse feature=level string {text}: unable to parse {level.strip()} as a short."
        )
    return name.strip(), value


def _requested(args: argparse.Namespace, op: str, kind: int, out: TextIO) -> dict[str, int]:
    features: list[str] | None = args.feature
    if args.release_version is not None and (args.metadata is not None or features):
        raise Terse("Can not specify `release-version` with other feature flags.")
    updates: dict[str, int] = {}
    if args.release_version is not None:
        mv = mv_level(args.release_version)
        if mv is None:
            raise Terse(
                f"Unknown metadata.version {args.release_version}. Supported metadata.version "
                f"are {_supported_mvs()}"
            )
        updates[METADATA_VERSION] = mv
        for name, level in default_levels(mv).items():
            if kind != UPGRADE or level > 0:  # an upgrade to 0 is not sent
                updates[name] = level
        return updates
    if args.metadata is not None:
        print(" `metadata` flag is deprecated and may be removed in a future release.", file=out)
        mv = mv_level(args.metadata)
        if mv is None:
            raise Terse(
                f"Unknown metadata.version {args.metadata}. Supported metadata.version are "
                f"{_supported_mvs()}"
            )
        updates[METADATA_VERSION] = mv
    for text in features or ():
        name, level = name_and_level(text)
        if name in updates:
            raise Terse(f"Feature {name} was specified more than once.")
        updates[name] = level
    return updates


async def _update(
    admin: ClusterAdmin, op: str, updates: dict[str, int], kind: int, dry_run: bool, out: TextIO
) -> None:
    if not updates:
        raise Terse(f"You must specify at least one feature to {op}")
    resp = await admin.call_controller(
        UPDATE_FEATURES,
        {
            "timeout": 60_000,
            "feature_updates": [
                {
                    "feature": name,
                    "max_version_level": level,
                    "upgrade_type": kind,
                    "allow_downgrade": kind != UPGRADE,
                }
                for name, level in updates.items()
            ],
            "validate_only": dry_run,
        },
    )
    top = code(resp.error_code)
    per: dict[str, str | None] = {}
    for name in updates:
        per[name] = _error_text(top, resp.error_message) if top else None
    for r in getattr(resp, "results", None) or ():
        c = code(r.error_code)
        if not top and r.feature in per:
            per[r.feature] = _error_text(c, r.error_message) if c else None
    failures = 0
    for name in sorted(per):
        level = updates[name]
        why = per[name]
        if why is not None:
            helper = "Can not " if dry_run else "Could not "
            what = f"disable {name}" if op == "disable" else f"{op} {name} to {level}"
            print(f"{helper}{what}. {why}", file=out)
            failures += 1
        else:
            verb = " can be " if dry_run else " was "
            obj = "disabled." if op == "disable" else f"{op}d to {level}."
            print(f"{name}{verb}{obj}", file=out)
    if failures:
        raise Terse(f"{failures} out of {len(updates)} operation(s) failed.")


def _error_text(c: int, message: str | None) -> str:
    return message or f"{code_name(c)}"


async def _describe(admin: ClusterAdmin, out: TextIO) -> None:
    session = await admin.session()
    resp = await session.call(
        API_VERSIONS, {"client_software_name": "kafka-features", "client_software_version": "1"}
    )
    if code(resp.error_code):
        raise CommandError(f"ApiVersions failed ({code_name(code(resp.error_code))})")
    finalized = {f.name: int(f.max_version_level) for f in resp.finalized_features}
    epoch = int(resp.finalized_features_epoch)
    for f in sorted(resp.supported_features, key=lambda f: f.name):
        name = f.name
        print(
            f"Feature: {name}\tSupportedMinVersion: {level_text(name, int(f.min_version))}\t"
            f"SupportedMaxVersion: {level_text(name, int(f.max_version))}\t"
            f"FinalizedVersionLevel: {level_text(name, finalized.get(name, 0))}\t"
            f"Epoch: {epoch if epoch >= 0 else '-'}",
            file=out,
        )


def version_mapping(release: str | None, out: TextIO) -> None:
    text = release if release is not None else MV_NAMES[LATEST_MV]
    mv = mv_level(text)
    if mv is None:
        raise Terse(
            f"Unknown release version '{text}'. Supported versions are: "
            f"{MV_NAMES[MINIMUM_MV]} to {MV_NAMES[LATEST_MV]}"
        )
    print(f"metadata.version={mv} ({text})", file=out)
    for name, level in default_levels(mv).items():
        print(f"{name}={level}", file=out)


def feature_dependencies(features: Sequence[str], out: TextIO) -> None:
    for text in features:
        name, level = name_and_level(text)
        if name == METADATA_VERSION:
            if level not in MV_NAMES:
                raise Terse(f"Unknown metadata.version {level}")
            print(f"{name}={level} ({MV_NAMES[level]}) has no dependencies.", file=out)
            continue
        if name not in FEATURES:
            raise Terse(f"Unknown feature: {name}")
        lo, hi, _ = FEATURES[name]
        if not lo <= level <= hi:
            raise Terse(f"No feature:{name} with feature level {level}")
        deps = DEPENDENCIES.get((name, level), {})
        if not deps:
            print(f"{name}={level} has no dependencies.", file=out)
            continue
        print(f"{name}={level} requires:", file=out)
        for dep, dep_level in deps.items():
            if dep == METADATA_VERSION:
                print(f"    {dep}={dep_level} ({MV_NAMES[dep_level]})", file=out)
            else:
                print(f"    {dep}={dep_level}", file=out)


async def _run(args: argparse.Namespace, out: TextIO) -> None:
    props = optional_config(args.command_config, "--command-config")
    controllers = args.bootstrap_controller is not None
    flag = "--bootstrap-controller" if controllers else "--bootstrap-server"
    targets = addresses(flag, args.bootstrap_controller if controllers else args.bootstrap_server)
    cmd = args.command
    if cmd == "version-mapping":
        version_mapping(args.release_version, out)
        return
    if cmd == "feature-dependencies":
        feature_dependencies(args.feature, out)
        return
    admin = ClusterAdmin(targets, props, controllers, TOOL)
    try:
        if cmd == "describe":
            await _describe(admin, out)
        elif cmd == "disable":
            kind = UNSAFE_DOWNGRADE if args.unsafe else SAFE_DOWNGRADE
            updates: dict[str, int] = {}
            for name in args.feature or ():
                if name in updates:
                    raise Terse(f"Feature {name} was specified more than once.")
                updates[name] = 0
            await _update(admin, "disable", updates, kind, args.dry_run, out)
        else:
            kind = UPGRADE
            if cmd == "downgrade":
                kind = UNSAFE_DOWNGRADE if args.unsafe else SAFE_DOWNGRADE
            updates = _requested(args, cmd, kind, out)
            await _update(admin, cmd, updates, kind, args.dry_run, out)
    finally:
        admin.close()


def main(
    argv: Sequence[str] | None = None, out: TextIO = sys.stdout, err: TextIO = sys.stderr
) -> int:
    return parse_and_run(_parser(), _run, argv, out, err, (Terse,))


if __name__ == "__main__":
    sys.exit(main())
