from gpuhost.cli import main

main()
