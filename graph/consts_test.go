package graph

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/purecuda/cuda/internal/cu"
)

// The package's constants are written as literals, so that go doc shows
// their values; each is the C enum's value.
func TestConstantsAreCUDAs(t *testing.T) {
	assert.EqualValues(t, cu.CU_GRAPH_NODE_TYPE_KERNEL, KindKernel, "KindKernel")
	assert.EqualValues(t, cu.CU_GRAPH_NODE_TYPE_MEMCPY, KindMemcpy, "KindMemcpy")
	assert.EqualValues(t, cu.CU_GRAPH_NODE_TYPE_MEMSET, KindMemset, "KindMemset")
	assert.EqualValues(t, cu.CU_GRAPH_NODE_TYPE_HOST, KindHost, "KindHost")
	assert.EqualValues(t, cu.CU_GRAPH_NODE_TYPE_GRAPH, KindChild, "KindChild")
	assert.EqualValues(t, cu.CU_GRAPH_NODE_TYPE_EMPTY, KindEmpty, "KindEmpty")
	assert.EqualValues(t, cu.CU_GRAPH_NODE_TYPE_WAIT_EVENT, KindEventWait, "KindEventWait")
	assert.EqualValues(t, cu.CU_GRAPH_NODE_TYPE_EVENT_RECORD, KindEventRecord, "KindEventRecord")
	assert.EqualValues(t, cu.CU_GRAPH_NODE_TYPE_MEM_ALLOC, KindMemAlloc, "KindMemAlloc")
	assert.EqualValues(t, cu.CU_GRAPH_NODE_TYPE_MEM_FREE, KindMemFree, "KindMemFree")
	assert.EqualValues(t, cu.CU_GRAPH_NODE_TYPE_CONDITIONAL, KindConditional, "KindConditional")
	assert.EqualValues(t, cu.CU_STREAM_CAPTURE_MODE_GLOBAL, CaptureGlobal, "CaptureGlobal")
	assert.EqualValues(t, cu.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL, CaptureThreadLocal, "CaptureThreadLocal")
	assert.EqualValues(t, cu.CU_STREAM_CAPTURE_MODE_RELAXED, CaptureRelaxed, "CaptureRelaxed")
	assert.EqualValues(t, cu.CU_STREAM_CAPTURE_STATUS_NONE, NotCapturing, "NotCapturing")
	assert.EqualValues(t, cu.CU_STREAM_CAPTURE_STATUS_ACTIVE, Capturing, "Capturing")
	assert.EqualValues(t, cu.CU_STREAM_CAPTURE_STATUS_INVALIDATED, CaptureInvalidated, "CaptureInvalidated")
	assert.EqualValues(t, cu.CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH, AutoFreeOnLaunch, "AutoFreeOnLaunch")
	assert.EqualValues(t, cu.CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD, Upload, "Upload")
	assert.EqualValues(t, cu.CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH, DeviceLaunch, "DeviceLaunch")
	assert.EqualValues(t, cu.CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY, UseNodePriority, "UseNodePriority")
	assert.EqualValues(t, cu.CUDA_GRAPH_INSTANTIATE_SUCCESS, InstantiateSuccess, "InstantiateSuccess")
	assert.EqualValues(t, cu.CUDA_GRAPH_INSTANTIATE_ERROR, InstantiateFailed, "InstantiateFailed")
	assert.EqualValues(t, cu.CUDA_GRAPH_INSTANTIATE_INVALID_STRUCTURE, InstantiateInvalidStructure, "InstantiateInvalidStructure")
	assert.EqualValues(t, cu.CUDA_GRAPH_INSTANTIATE_NODE_OPERATION_NOT_SUPPORTED, InstantiateNodeOperationUnsupported, "InstantiateNodeOperationUnsupported")
	assert.EqualValues(t, cu.CUDA_GRAPH_INSTANTIATE_MULTIPLE_CTXS_NOT_SUPPORTED, InstantiateMultipleContexts, "InstantiateMultipleContexts")
	assert.EqualValues(t, cu.CUDA_GRAPH_INSTANTIATE_CONDITIONAL_HANDLE_UNUSED, InstantiateConditionalHandleUnused, "InstantiateConditionalHandleUnused")
	assert.EqualValues(t, cu.CU_GRAPH_EXEC_UPDATE_SUCCESS, UpdateSuccess, "UpdateSuccess")
	assert.EqualValues(t, cu.CU_GRAPH_EXEC_UPDATE_ERROR, UpdateFailed, "UpdateFailed")
	assert.EqualValues(t, cu.CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED, UpdateTopologyChanged, "UpdateTopologyChanged")
	assert.EqualValues(t, cu.CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED, UpdateNodeTypeChanged, "UpdateNodeTypeChanged")
	assert.EqualValues(t, cu.CU_GRAPH_EXEC_UPDATE_ERROR_FUNCTION_CHANGED, UpdateFunctionChanged, "UpdateFunctionChanged")
	assert.EqualValues(t, cu.CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED, UpdateParametersChanged, "UpdateParametersChanged")
	assert.EqualValues(t, cu.CU_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED, UpdateNotSupported, "UpdateNotSupported")
	assert.EqualValues(t, cu.CU_GRAPH_EXEC_UPDATE_ERROR_UNSUPPORTED_FUNCTION_CHANGE, UpdateUnsupportedFunctionChange, "UpdateUnsupportedFunctionChange")
	assert.EqualValues(t, cu.CU_GRAPH_EXEC_UPDATE_ERROR_ATTRIBUTES_CHANGED, UpdateAttributesChanged, "UpdateAttributesChanged")
	assert.EqualValues(t, cu.CU_GRAPH_DEBUG_DOT_FLAGS_VERBOSE, DOTVerbose, "DOTVerbose")
	assert.EqualValues(t, cu.CU_GRAPH_DEBUG_DOT_FLAGS_KERNEL_NODE_PARAMS, DOTKernelParams, "DOTKernelParams")
	assert.EqualValues(t, cu.CU_GRAPH_DEBUG_DOT_FLAGS_MEMCPY_NODE_PARAMS, DOTMemcpyParams, "DOTMemcpyParams")
	assert.EqualValues(t, cu.CU_GRAPH_DEBUG_DOT_FLAGS_MEMSET_NODE_PARAMS, DOTMemsetParams, "DOTMemsetParams")
	assert.EqualValues(t, cu.CU_GRAPH_DEBUG_DOT_FLAGS_HOST_NODE_PARAMS, DOTHostParams, "DOTHostParams")
	assert.EqualValues(t, cu.CU_GRAPH_DEBUG_DOT_FLAGS_EVENT_NODE_PARAMS, DOTEventParams, "DOTEventParams")
	assert.EqualValues(t, cu.CU_GRAPH_DEBUG_DOT_FLAGS_KERNEL_NODE_ATTRIBUTES, DOTKernelAttributes, "DOTKernelAttributes")
	assert.EqualValues(t, cu.CU_GRAPH_DEBUG_DOT_FLAGS_HANDLES, DOTHandles, "DOTHandles")
	assert.EqualValues(t, cu.CU_GRAPH_DEBUG_DOT_FLAGS_MEM_ALLOC_NODE_PARAMS, DOTMemAllocParams, "DOTMemAllocParams")
	assert.EqualValues(t, cu.CU_GRAPH_DEBUG_DOT_FLAGS_MEM_FREE_NODE_PARAMS, DOTMemFreeParams, "DOTMemFreeParams")
	assert.EqualValues(t, cu.CU_GRAPH_DEBUG_DOT_FLAGS_CONDITIONAL_NODE_PARAMS, DOTConditional, "DOTConditional")
	assert.EqualValues(t, cu.CU_GRAPH_COND_ASSIGN_DEFAULT, AssignDefault, "AssignDefault")
}
