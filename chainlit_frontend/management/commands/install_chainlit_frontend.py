"""``manage.py install_chainlit_frontend``: puts Chainlit's frontend and copilot where
``CHAINLIT_FRONTEND_DIR`` points (by default ``var/chainlit-frontend``)."""

import tempfile
from argparse import ArgumentParser
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from chainlit_frontend import build, installing


class Command(BaseCommand):
    help = (
        "Install Chainlit's web frontend and copilot widget from the chainlit wheel on PyPI "
        f"(chainlit=={installing.CHAINLIT_VERSION}, with pip), a given wheel or a directory."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--wheel", type=Path, help="a chainlit wheel file, instead of downloading one")
        parser.add_argument(
            "--from-dir",
            type=Path,
            help="a directory with frontend/dist and copilot/dist (an installed chainlit package, a Chainlit checkout)",
        )
        parser.add_argument(
            "--chainlit-version",
            dest="chainlit_version",
            default=installing.CHAINLIT_VERSION,
            help="the chainlit release to download (default: %(default)s, the one Tether is tested with)",
        )
        parser.add_argument(
            "--dest", type=Path, help="where to install (default: CHAINLIT_FRONTEND_DIR or var/)"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        default = settings.CHAINLIT_FRONTEND_DIR or settings.VAR_DIR / "chainlit-frontend"
        dest = Path(options["dest"] or default).resolve()
        try:
            if options["wheel"] and options["from_dir"]:
                raise installing.InstallError("give --wheel or --from-dir, not both")
            if options["wheel"] or options["from_dir"]:
                record = installing.install(options["wheel"] or options["from_dir"], dest)
            else:
                with tempfile.TemporaryDirectory() as downloads:
                    wheel = installing.download_wheel(Path(downloads), options["chainlit_version"])
                    record = installing.install(wheel, dest)
        except installing.InstallError as error:
            raise CommandError(str(error)) from error
        version = record["chainlit_version"] or "unknown version"
        self.stdout.write(f"Installed Chainlit's frontend ({version}, {record['files']} files) in {dest}")
        if settings.CHAINLIT_FRONTEND_DIR is None or Path(settings.CHAINLIT_FRONTEND_DIR).resolve() != dest:
            self.stdout.write(f"Serve it with CHAINLIT_FRONTEND_DIR={dest}")
        self.stdout.write(f"It answers at {build.root_path()}/ (CHAINLIT_PATH_PREFIX)")
