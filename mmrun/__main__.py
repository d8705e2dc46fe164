from mmrun.cli.main import main

main()
