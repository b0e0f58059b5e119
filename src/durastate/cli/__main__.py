from durastate.cli import main

main()
