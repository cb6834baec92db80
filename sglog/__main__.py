from sglog.cli import run

run()
