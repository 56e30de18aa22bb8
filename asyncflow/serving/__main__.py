"""`python -m asyncflow.serving --rest_api_port=N --model_name=M --model_base_path=DIR`."""

from asyncflow.serving.server import main

main()
