from sglog.cli import main

main()
