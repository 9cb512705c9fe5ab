# etc/ defaults
