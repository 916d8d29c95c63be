// sendFromFile and cancelTransfer (file_transfer.c), registered by envd_native.c.
#pragma once
#include <node_api.h>

napi_value send_from_file(napi_env env, napi_callback_info info);
napi_value cancel_transfer(napi_env env, napi_callback_info info);
